package owned

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// hangFixture owns one HTTP worker whose probes all pass, with SMG's failure threshold (10)
// and the hang rule judging by a 3 s request timeout; it returns the fixture and the worker,
// ready.
func hangFixture(t *testing.T) (*fixture, worker.ID) {
	f := newFixture(t, withBreaker(func(c *breaker.Config) {
		c.FailureThreshold = 10
		c.HangTimeout = 3 * time.Second
	}))
	id := f.own(httpSpec(9400), 1)
	synctest.Wait() // the first probe: ready
	return f, id
}

// TestOwnerTakesOutAHungWorker: requests through two other gateways got no answer within the
// request timeout while the worker answered nobody, and its probes kept passing: the owner
// opens its circuit at the second report, far below the failure threshold, so that its next
// bulletin takes the worker out of every gateway's routing; passing probes do not bring it
// back before the circuit's timeout.
func TestOwnerTakesOutAHungWorker(t *testing.T) {
	tests := []struct {
		name   string
		second func(f *fixture, id worker.ID) // the second timeout
	}{
		{"reported by two gateways", func(f *fixture, id worker.ID) {
			f.m.RecordRemote(id, 1, breaker.TimedOut, 1) // gateway c's report
		}},
		{"one reported, one the owner's own", func(f *fixture, id worker.ID) {
			f.m.OnOutcome(f.pool.Get(id), breaker.NoResponseInTime, true)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, id := hangFixture(t)
				w := f.pool.Get(id)
				f.m.RecordRemote(id, 1, breaker.Success, 5) // answered before it hung
				testkit.Advance(3 * time.Second)            // the first requests into the hang time out
				if !f.m.RecordRemote(id, 1, breaker.TimedOut, 1) {
					t.Fatal("the owner refused gateway b's report")
				}
				if !w.Allow() {
					t.Fatal("one timeout opened the circuit")
				}
				testkit.Advance(200 * time.Millisecond)
				tt.second(f, id)
				if w.Allow() {
					t.Fatal("the circuit is still closed after two timeouts in silence")
				}
				if got := f.metric("meshgw_worker_cb_hang_opens_total", "worker", w.URL); got != 1 {
					t.Errorf("meshgw_worker_cb_hang_opens_total = %v, want 1", got)
				}
				testkit.Advance(30 * time.Second) // probes pass: not a promotion
				if w.Allow() {
					t.Error("passing probes let the worker back before the circuit's timeout")
				}
				if st, _ := f.m.Status(id); st.Health.String() != "ready" || st.Breaker.State != breaker.Open {
					t.Errorf("health %v, breaker %v; want ready and open", st.Health, st.Breaker.State)
				}
			})
		})
	}
}

// TestOwnerKeepsASlowWorker: a worker busy with long prefills still answers some requests
// while others time out, through any gateway: the owner never judges it hung, and its circuit
// stays closed (the failure threshold, not reached, is left to judge it).
func TestOwnerKeepsASlowWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, id := hangFixture(t)
		w := f.pool.Get(id)
		for range 10 {
			f.m.RecordRemote(id, 1, breaker.Success, 1) // gateway b: a request answered
			testkit.Advance(2 * time.Second)
			f.m.RecordRemote(id, 1, breaker.TimedOut, 1) // gateway c: a long prefill timed out
			f.m.OnOutcome(w, breaker.NoResponseInTime, true)
			testkit.Advance(time.Second)
		}
		if !w.Allow() {
			t.Fatal("the owner took out a worker that kept answering")
		}
		if got := f.metric("meshgw_worker_cb_hang_opens_total", "worker", w.URL); got != 0 {
			t.Errorf("meshgw_worker_cb_hang_opens_total = %v, want 0", got)
		}
	})
}
