package health

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshgw/meshgw/worker"
)

// meshgw_worker_health of a worker no longer checked reads -1 for RemovedSeriesTTL, then is
// deleted; a worker added again before that keeps its series.
func TestRemovedHealthSeriesTTL(t *testing.T) {
	clk, reg := newManualClock(), prometheus.NewPedanticRegistry()
	c := newChecker(t, DefaultConfig(), newFake(), nil, func(o *Options) {
		o.Clock, o.Registerer = clk, reg
	})
	gone, back := engine(9201, nil), engine(9202, nil)
	for _, s := range []worker.Spec{gone, back} {
		if err := c.Add(s, Ready); err != nil {
			t.Fatal(err)
		}
		c.Remove(idOf(t, s))
	}
	health := func(s worker.Spec) (float64, bool) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "meshgw_worker_health" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == s.URL {
					return m.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}
	if v, ok := health(gone); !ok || v != -1 {
		t.Fatalf("right after removal: %v %v, want -1", v, ok)
	}
	clk.Advance(RemovedSeriesTTL / 2)
	if err := c.Add(back, Ready); err != nil { // checked again
		t.Fatal(err)
	}
	clk.Advance(RemovedSeriesTTL/2 - time.Nanosecond)
	if v, ok := health(gone); !ok || v != -1 {
		t.Fatalf("just before the TTL: %v %v, want -1", v, ok)
	}
	clk.Advance(time.Nanosecond)
	if v, ok := health(gone); ok {
		t.Errorf("a worker removed %v ago still has meshgw_worker_health %v", RemovedSeriesTTL, v)
	}
	if v, ok := health(back); !ok || v != 1 {
		t.Errorf("a worker checked again: %v %v, want 1", v, ok)
	}
	if n := testutil.CollectAndCount(c.met.checks); n != 8 {
		t.Errorf("%d health-check counters, want the 8 published at start", n)
	}
}
