package owned

import (
	"testing"
	"testing/synctest"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/worker"
)

// Reports from other gateways reach an owned worker's breaker only at the epoch given to Own.
func TestRecordRemote(t *testing.T) {
	tests := []struct {
		name      string
		owned     bool
		epoch     uint64 // the report's; the worker is owned at epoch 5
		o         breaker.Outcome
		n         int
		wantOK    bool
		failures  float64 // meshgw_worker_cb_outcomes_total{outcome="failure"} afterwards
		successes float64
		allow     bool
	}{
		{"failures below the threshold", true, 5, breaker.Failure, 2, true, 2, 0, true},
		{"failures open the circuit", true, 5, breaker.Failure, 3, true, 3, 0, false},
		{"a long run", true, 5, breaker.Failure, 5000, true, 5000, 0, false},
		{"successes", true, 5, breaker.Success, 4, true, 0, 4, true},
		{"timeouts are failures", true, 5, breaker.TimedOut, 3, true, 3, 0, false},
		{"ignored records nothing", true, 5, breaker.Ignored, 4, true, 0, 0, true},
		{"zero records nothing", true, 5, breaker.Failure, 0, true, 0, 0, true},
		{"an older epoch is refused", true, 4, breaker.Failure, 3, false, 0, 0, true},
		{"a newer epoch is refused", true, 6, breaker.Failure, 3, false, 0, 0, true},
		{"a worker not owned is refused", false, 5, breaker.Failure, 3, false, 0, 0, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t) // breakers open at 3 failures
				spec := httpSpec(9300 + i)
				var id worker.ID
				if tt.owned {
					id = f.own(spec, 5)
					synctest.Wait() // the first probe promotes it to ready before any report
				} else {
					id = idOf(t, spec)
				}
				if got := f.m.RecordRemote(id, tt.epoch, tt.o, tt.n); got != tt.wantOK {
					t.Errorf("RecordRemote = %v, want %v", got, tt.wantOK)
				}
				if !tt.owned {
					return
				}
				w := f.pool.Get(id)
				for o, want := range map[string]float64{"failure": tt.failures, "success": tt.successes} {
					if got := f.metric("meshgw_worker_cb_outcomes_total", "worker", w.URL, "outcome", o); got != want {
						t.Errorf("outcomes{%s} = %v, want %v", o, got, want)
					}
				}
				if got := w.Allow(); got != tt.allow {
					t.Errorf("Allow = %v, want %v", got, tt.allow)
				}
			})
		})
	}
}

// A success among reported failures resets the count: runs are recorded in the order given.
func TestRecordRemoteKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		id := f.own(httpSpec(9400), 1)
		synctest.Wait()
		f.m.RecordRemote(id, 1, breaker.Failure, 2)
		f.m.RecordRemote(id, 1, breaker.Success, 1)
		f.m.RecordRemote(id, 1, breaker.Failure, 2)
		if !f.pool.Get(id).Allow() {
			t.Fatal("circuit opened although no 3 failures were consecutive")
		}
		f.m.RecordRemote(id, 1, breaker.Failure, 1)
		if f.pool.Get(id).Allow() {
			t.Fatal("circuit still allows after 3 consecutive failures")
		}
	})
}
