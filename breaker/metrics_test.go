package breaker

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
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
	m, err := NewMetrics(reg)
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
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("registering twice on one registry succeeded")
	}
}
