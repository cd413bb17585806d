package breaker

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	const w = "http://127.0.0.1:8013"
	clk := newFakeClock()
	b := New(testConfig(), Options{Clock: clk.Now, Hooks: m.Hooks(w)})
	if got := testutil.ToFloat64(m.readmissions.WithLabelValues(w)); got != 0 {
		t.Fatalf("readmissions at start = %v, want 0", got)
	}
	gauge := func(v *prometheus.GaugeVec) float64 { return testutil.ToFloat64(v.WithLabelValues(w)) }
	if gauge(m.state) != 0 || gauge(m.failures) != 0 || gauge(m.successes) != 0 {
		t.Fatal("a new worker's series are not published at closed and zero")
	}

	for range 3 {
		b.Record(Failure)
	}
	b.Record(Ignored)
	if got := gauge(m.state); got != 1 {
		t.Errorf("state = %v, want 1 (open)", got)
	}
	if got := gauge(m.failures); got != 3 {
		t.Errorf("consecutive failures = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.outcomes.WithLabelValues(w, "failure")); got != 3 {
		t.Errorf("failure outcomes = %v, want 3 (ignored is not an outcome)", got)
	}

	b.Promote()
	b.Record(Success)
	if got := gauge(m.state); got != 2 {
		t.Errorf("state = %v, want 2 (half_open)", got)
	}
	if got := gauge(m.successes); got != 1 {
		t.Errorf("consecutive successes = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.readmissions.WithLabelValues(w)); got != 1 {
		t.Errorf("readmissions = %v, want 1", got)
	}
	b.Record(Success)
	for _, tr := range []struct{ from, to string }{{"closed", "open"}, {"open", "half_open"}, {"half_open", "closed"}} {
		if got := testutil.ToFloat64(m.transitions.WithLabelValues(w, tr.from, tr.to)); got != 1 {
			t.Errorf("transitions %s->%s = %v, want 1", tr.from, tr.to, got)
		}
	}
	if got := testutil.ToFloat64(m.outcomes.WithLabelValues(w, "success")); got != 2 {
		t.Errorf("success outcomes = %v, want 2", got)
	}

	m.Removed(w)
	if got := gauge(m.state); got != -1 {
		t.Errorf("state after removal = %v, want -1", got)
	}
	if n := testutil.CollectAndCount(m.failures); n != 0 {
		t.Errorf("%d consecutive-failure series left after removal", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestMetricsNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Hooks("http://127.0.0.1:1")
	want := `
# HELP meshgw_worker_cb_health_readmissions_total Open circuits moved to half-open at once because health checks promoted the worker to ready.
# TYPE meshgw_worker_cb_health_readmissions_total counter
meshgw_worker_cb_health_readmissions_total{worker="http://127.0.0.1:1"} 0
# HELP meshgw_worker_cb_state Circuit breaker state per worker (0 closed, 1 open, 2 half_open, -1 removed).
# TYPE meshgw_worker_cb_state gauge
meshgw_worker_cb_state{worker="http://127.0.0.1:1"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"meshgw_worker_cb_health_readmissions_total", "meshgw_worker_cb_state"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "meshgw_worker_cb_consecutive_failures", "meshgw_worker_cb_consecutive_successes"); err != nil || n != 2 {
		t.Fatalf("consecutive gauges: %d series, %v; want 2", n, err)
	}
	if _, err := NewMetrics(reg, nil); err == nil {
		t.Fatal("registering twice on one registry succeeded")
	}
}

// A removed worker's series read -1 for RemovedSeriesTTL, then are deleted; a worker published
// again before that keeps them.
func TestRemovedSeriesTTL(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	clk := newFakeClock()
	m, err := NewMetrics(reg, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	const gone, back = "http://127.0.0.1:1", "http://127.0.0.1:2"
	for _, w := range []string{gone, back} {
		b := New(testConfig(), Options{Clock: clk.Now, Hooks: m.Hooks(w)})
		for range 3 {
			b.Record(Failure) // opens: a transition and outcomes
		}
		m.Removed(w)
	}
	series := func(w string) (n int, state float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		state = -2
		for _, mf := range mfs {
			for _, s := range mf.GetMetric() {
				for _, lp := range s.GetLabel() {
					if lp.GetName() == "worker" && lp.GetValue() == w {
						n++
						if mf.GetName() == "meshgw_worker_cb_state" {
							state = s.GetGauge().GetValue()
						}
					}
				}
			}
		}
		return n, state
	}
	if n, st := series(gone); n == 0 || st != -1 {
		t.Fatalf("right after removal: %d series, state %v; want the -1 kept", n, st)
	}
	clk.Advance(RemovedSeriesTTL / 2)
	m.Hooks(back) // registered again
	clk.Advance(RemovedSeriesTTL/2 - time.Nanosecond)
	if n, st := series(gone); n == 0 || st != -1 {
		t.Fatalf("just before the TTL: %d series, state %v; want the -1 kept", n, st)
	}
	clk.Advance(time.Nanosecond)
	if n, _ := series(gone); n != 0 {
		t.Errorf("%d series of a worker removed %v ago, want none", n, RemovedSeriesTTL)
	}
	if n, st := series(back); n == 0 || st != 0 {
		t.Errorf("a worker registered again: %d series, state %v; want its series, closed", n, st)
	}
	clk.Advance(10 * RemovedSeriesTTL)
	if n, _ := series(back); n == 0 {
		t.Error("a worker registered again lost its series")
	}
}
