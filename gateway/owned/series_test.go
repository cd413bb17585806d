package owned

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/test/testkit"
)

// workerSeries counts the fixture's series whose worker label is one of urls.
func (f *fixture) workerSeries(urls map[string]bool) int {
	f.t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "worker" && urls[lp.GetValue()] {
					n++
				}
			}
		}
	}
	return n
}

// 50 workers owned and removed leave no series behind: each reads -1 (SMG) for
// breaker.RemovedSeriesTTL after its removal, then its series are deleted. Time is the synctest
// bubble's fake clock.
func TestRemovedWorkersSeriesAreDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		urls := map[string]bool{}
		for i := range 50 {
			spec := httpSpec(9100 + i)
			urls[spec.URL] = true
			id := f.own(spec, 1)
			testkit.Advance(time.Second) // probed: ready
			f.m.Disown(id)
			if err := f.pool.Remove(id); err != nil {
				t.Fatal(err)
			}
		}
		last := httpSpec(9149).URL
		if got := f.metric("meshgw_worker_cb_state", "worker", last); got != -1 {
			t.Fatalf("cb_state of a removed worker = %v, want -1", got)
		}
		if got := f.metric("meshgw_worker_health", "worker", last); got != -1 {
			t.Fatalf("worker_health of a removed worker = %v, want -1", got)
		}
		if n := f.workerSeries(urls); n == 0 {
			t.Fatal("no series right after the removals: the -1 must stay for a while")
		}
		testkit.Advance(breaker.RemovedSeriesTTL)
		if n := f.workerSeries(urls); n != 0 {
			t.Fatalf("%d series of 50 removed workers left after %v, want none", n, breaker.RemovedSeriesTTL)
		}
	})
}
