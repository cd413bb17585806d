package owned

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// A newly owned HTTP or gRPC worker is ready at its first passing probe (registration reached
// it); when that probe fails it stays pending and needs S=2 passes.
func TestRegistrationReachesWorker(t *testing.T) {
	tests := []struct {
		name  string
		url   string
		first error
		// health after the first probe, then after each later passing probe
		want []health.State
	}{
		{"http reached", "http://127.0.0.1:9001", nil, []health.State{health.Ready}},
		{"grpc reached", "grpc://127.0.0.1:9002", nil, []health.State{health.Ready}},
		{"http first probe fails", "http://127.0.0.1:9003", errDown,
			[]health.State{health.Pending, health.Pending, health.Ready}},
		{"grpc first probe fails", "grpc://127.0.0.1:9004", errDown,
			[]health.State{health.Pending, health.Pending, health.Ready}},
		{"external needs S passes", "https://api.example.test/v1", nil,
			[]health.State{health.Pending, health.Ready}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t)
				spec := worker.Spec{URL: tt.url}
				if strings.HasPrefix(tt.url, "https:") {
					spec.ConnectionMode, spec.Provider = worker.ModeExternal, "openai"
					spec.Health = &worker.Health{DisableHealthCheck: ptr(false)}
				}
				f.probe.set(idOf(t, spec), tt.first)
				id := f.own(spec, 7)
				synctest.Wait()
				f.wantHealth(id, tt.want[0])
				f.probe.set(id, nil)
				for _, want := range tt.want[1:] {
					testkit.Advance(10 * time.Second)
					f.wantHealth(id, want)
				}
				if got := f.metric("meshgw_worker_health", "worker", f.pool.Get(id).URL); got != 1 {
					t.Errorf("meshgw_worker_health = %v, want 1", got)
				}
			})
		})
	}
}

// F failures take a ready worker out of routing, S passes bring it back, and the promotion
// readmits its open circuit at once (half-open), counted once.
func TestFailuresLeaveAndPromotionReadmits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		id := f.own(httpSpec(9001), 1)
		synctest.Wait()
		f.wantHealth(id, health.Ready)
		w := f.pool.Get(id)
		for range 3 {
			f.m.OnOutcome(w, 500, false)
		}
		if w.Allow() {
			t.Fatal("circuit still allows after 3 failed requests")
		}
		f.probe.set(id, errDown)
		testkit.Advance(10 * time.Second)
		testkit.Advance(10 * time.Second)
		f.wantHealth(id, health.Ready)
		testkit.Advance(10 * time.Second)
		f.wantHealth(id, health.NotReady)
		st, _ := f.m.Status(id)
		if st.ConsecutiveFailures != 3 || st.LastError != "status 503" || st.LastStatusCode != 503 || st.LastProbe.IsZero() {
			t.Errorf("status after 3 failed probes: %+v", st)
		}
		if got := f.metric("meshgw_worker_health", "worker", w.URL); got != 0 {
			t.Errorf("meshgw_worker_health = %v, want 0", got)
		}
		f.probe.set(id, nil)
		testkit.Advance(10 * time.Second)
		f.wantHealth(id, health.NotReady)
		testkit.Advance(10 * time.Second)
		f.wantHealth(id, health.Ready)
		st, _ = f.m.Status(id)
		if st.Breaker.State != breaker.HalfOpen || !w.Allow() {
			t.Errorf("breaker after promotion: %+v, want half_open", st.Breaker)
		}
		if got := f.metric("meshgw_worker_cb_health_readmissions_total", "worker", w.URL); got != 1 {
			t.Errorf("readmissions = %v, want 1", got)
		}
		// Passing probes on a ready worker are not promotions.
		testkit.Advance(30 * time.Second)
		if got := f.metric("meshgw_worker_cb_health_readmissions_total", "worker", w.URL); got != 1 {
			t.Errorf("readmissions after more passes = %v, want 1", got)
		}
		if n := len(f.logs.Lines("worker health changed", "to=not_ready")); n != 1 {
			t.Errorf("%d log lines for the move to not_ready, want 1", n)
		}
	})
}

// OnOutcome classifies with the worker's own lists: 500 and no answer fail, 429 counts nothing,
// 400 succeeds; a worker not owned here is not recorded.
func TestOnOutcomeClassifies(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		connErr  bool
		override *worker.Resilience
		want     string // the outcome counter that moved, "" for none
	}{
		{"500 fails", 500, false, nil, "failure"},
		{"no answer fails", 0, true, nil, "failure"},
		{"503 fails", 503, false, nil, "failure"},
		{"429 is capacity", 429, false, nil, ""},
		{"400 succeeds", 400, false, nil, "success"},
		{"200 succeeds", 200, false, nil, "success"},
		{"own capacity list", 503, false, &worker.Resilience{CapacityStatusCodes: []int{503}}, ""},
		{"own retryable list", 500, false, &worker.Resilience{RetryableStatusCodes: []int{502}}, "success"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t)
				spec := httpSpec(9100 + i)
				spec.Resilience = tt.override
				id := f.own(spec, 1)
				w := f.pool.Get(id)
				f.m.OnOutcome(w, tt.status, tt.connErr)
				for _, o := range []string{"success", "failure"} {
					want := 0.0
					if o == tt.want {
						want = 1
					}
					if got := f.metric("meshgw_worker_cb_outcomes_total", "worker", w.URL, "outcome", o); got != want {
						t.Errorf("outcomes{%s} = %v, want %v", o, got, want)
					}
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		w, _, _ := f.pool.Upsert(httpSpec(9200), pool.OriginLocal) // in the pool, not owned
		f.m.OnOutcome(w, 500, false)
		if w.Breaker() != nil {
			t.Error("a worker not owned got a breaker")
		}
	})
}

// --disable-circuit-breaker keeps circuits closed while outcomes are still counted; a worker's
// own cb_failure_threshold still applies.
func TestDisabledBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, withBreaker(func(c *breaker.Config) { c.Disabled = true }))
		plain := f.own(httpSpec(9001), 1)
		own := httpSpec(9002)
		own.Resilience = &worker.Resilience{CBFailureThreshold: ptr(2)}
		strict := f.own(own, 1)
		synctest.Wait() // the first probes promote both workers to ready
		for _, id := range []worker.ID{plain, strict} {
			for range 20 {
				f.m.OnOutcome(f.pool.Get(id), 500, false)
			}
		}
		if !f.pool.Get(plain).Allow() {
			t.Error("a disabled breaker opened")
		}
		if got := f.metric("meshgw_worker_cb_outcomes_total", "worker", "http://127.0.0.1:9001", "outcome", "failure"); got != 20 {
			t.Errorf("failures counted = %v, want 20", got)
		}
		if f.pool.Get(strict).Allow() {
			t.Error("a worker's own cb_failure_threshold did not apply under --disable-circuit-breaker")
		}
	})
}

// Own of a changed spec (a PATCH) updates in place: health state, breaker counts and the circuit
// survive; the new thresholds apply; the epoch is the new one.
func TestOwnUpdatesInPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		spec := httpSpec(9001)
		id := f.own(spec, 1)
		synctest.Wait()
		w := f.pool.Get(id)
		f.m.OnOutcome(w, 500, false)
		f.m.OnOutcome(w, 500, false)
		spec.Resilience = &worker.Resilience{CBFailureThreshold: ptr(5)}
		spec.Health = &worker.Health{FailureThreshold: ptr(1)}
		if _, _, err := f.pool.Upsert(spec, pool.OriginLocal); err != nil {
			t.Fatal(err)
		}
		f.m.Own(spec, 4, false)
		f.m.Own(spec, 4, false) // idempotent
		st, _ := f.m.Status(id)
		if st.Health != health.Ready || st.Breaker.ConsecutiveFailures != 2 || st.Epoch != 4 {
			t.Fatalf("status after PATCH: %+v", st)
		}
		w = f.pool.Get(id)
		f.m.OnOutcome(w, 500, false) // 3: the old threshold would open
		if !w.Allow() {
			t.Fatal("the old cb_failure_threshold still applied after the PATCH")
		}
		f.probe.set(id, errDown)
		testkit.Advance(10 * time.Second) // one failure is enough now
		f.wantHealth(id, health.NotReady)
	})
}

// With --remove-unhealthy-workers a failed worker is removed: through OnRemove with its epoch,
// or from the pool when there is no OnRemove. Without it, the worker stays and rejoins.
func TestFailedWorkerRemoval(t *testing.T) {
	fail := func(f *fixture, id worker.ID) {
		f.probe.set(id, errDown)
		for range 3 + 9 { // F to not_ready, then 3×F to failed
			testkit.Advance(10 * time.Second)
		}
	}
	t.Run("OnRemove", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, withHealth(func(c *health.Config) { c.RemoveUnhealthyWorkers = true }))
			id := f.own(httpSpec(9001), 42)
			synctest.Wait()
			fail(f, id)
			synctest.Wait()
			if diff := cmp.Diff([]string{string(id) + " 42 failed"}, f.removedCopy()); diff != "" {
				t.Errorf("OnRemove calls (-want +got):\n%s", diff)
			}
			if _, ok := f.m.Status(id); ok {
				t.Error("a removed worker is still owned")
			}
			if got := f.metric("meshgw_worker_cb_state", "worker", "http://127.0.0.1:9001"); got != -1 {
				t.Errorf("meshgw_worker_cb_state = %v, want -1", got)
			}
			if got := f.metric("meshgw_worker_health", "worker", "http://127.0.0.1:9001"); got != -1 {
				t.Errorf("meshgw_worker_health = %v, want -1", got)
			}
		})
	})
	t.Run("from the pool", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, withoutOnRemove(), withHealth(func(c *health.Config) { c.RemoveUnhealthyWorkers = true }))
			id := f.own(httpSpec(9001), 42)
			synctest.Wait()
			fail(f, id)
			if f.pool.Get(id) != nil {
				t.Error("the failed worker is still in the pool")
			}
		})
	})
	t.Run("kept", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t)
			id := f.own(httpSpec(9001), 42)
			synctest.Wait()
			fail(f, id)
			f.wantHealth(id, health.Failed)
			f.probe.set(id, nil)
			testkit.Advance(20 * time.Second)
			f.wantHealth(id, health.Ready)
			if len(f.removedCopy()) != 0 {
				t.Errorf("removed without --remove-unhealthy-workers: %v", f.removedCopy())
			}
		})
	})
}

// Disown stops probes and detaches the breaker, leaving the worker in the pool.
func TestDisown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		id := f.own(httpSpec(9001), 1)
		synctest.Wait()
		f.m.Disown(id)
		probes := f.probe.count(id)
		testkit.Advance(time.Minute)
		if f.probe.count(id) != probes {
			t.Error("a disowned worker is still probed")
		}
		w := f.pool.Get(id)
		if w == nil || w.Breaker() != nil {
			t.Fatalf("after Disown the pool's worker is %v with breaker %v", w, w.Breaker())
		}
		if _, ok := f.m.Status(id); ok {
			t.Error("Status of a disowned worker")
		}
		if got := f.metric("meshgw_worker_cb_state", "worker", w.URL); got != -1 {
			t.Errorf("meshgw_worker_cb_state = %v, want -1", got)
		}
		f.m.Disown(id) // idempotent
	})
}

// allowNone is a breaker view that admits nothing, as OnDisown's hook attaches.
type allowNone struct{}

func (allowNone) Allow() bool { return false }

// Disown tells Options.OnDisown the worker's last state before its breaker leaves the pool's
// worker, and leaves in place the view the hook attached: no request slips in between.
func TestDisownTellsOnDisown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []Status
		var f *fixture
		f = newFixture(t, func(o *Options) {
			o.OnDisown = func(id worker.ID, last Status) {
				got = append(got, last)
				if w := f.pool.Get(id); w == nil || w.Allow() {
					t.Errorf("OnDisown called after the open breaker left the pool's worker: %v", w)
				}
				_ = f.pool.SetBreaker(id, allowNone{})
			}
		})
		id := f.own(httpSpec(9001), 7)
		synctest.Wait()
		for range 3 {
			f.m.OnOutcome(f.pool.Get(id), 0, true)
		}
		f.m.Disown(id)
		if len(got) != 1 || got[0].Epoch != 7 || got[0].Health != health.Ready || got[0].Breaker.State != breaker.Open {
			t.Fatalf("OnDisown got %+v; want one call, epoch 7, ready, breaker open", got)
		}
		if w := f.pool.Get(id); w.Breaker() != pool.Breaker(allowNone{}) {
			t.Errorf("Disown replaced the breaker view OnDisown attached: %v", w.Breaker())
		}
		f.m.Disown(id) // not owned any more: nothing to hand over
		if len(got) != 1 {
			t.Errorf("OnDisown called %d times, want once", len(got))
		}
	})
}

// The is_dead quarantine stops the probes and keeps the worker pending; releasing it verifies
// the worker again, its breaker state kept.
func TestQuarantine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		spec := httpSpec(9001)
		id := f.own(spec, 1)
		synctest.Wait()
		f.m.OnOutcome(f.pool.Get(id), 500, false)
		f.m.Own(spec, 1, true)
		f.wantHealth(id, health.Pending)
		probes := f.probe.count(id)
		testkit.Advance(time.Minute)
		if f.probe.count(id) != probes {
			t.Error("a quarantined worker is still probed")
		}
		f.m.Own(spec, 1, false)
		synctest.Wait()
		f.wantHealth(id, health.Ready)
		if st, _ := f.m.Status(id); st.Breaker.ConsecutiveFailures != 0 || st.Dead {
			// The promotion to ready resets a closed circuit's failures.
			t.Errorf("status after release: %+v", st)
		}
	})
}

// A ZMQ worker is ready when its handshake completes (the link's check passes), without S
// passes, and its check runs even with health checks disabled.
func TestZMQHandshake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, withHealth(func(c *health.Config) { c.DisableHealthCheck = true }))
		spec := worker.Spec{URL: "tcp://127.0.0.1:5555"}
		f.probe.set(idOf(t, spec), &health.ProbeError{Reason: "handshake not done"})
		id := f.own(spec, 1)
		synctest.Wait()
		f.wantHealth(id, health.Pending)
		f.probe.set(id, nil)
		testkit.Advance(10 * time.Second)
		f.wantHealth(id, health.Ready)
		// Plain engines count ready at once when checks are disabled, unprobed.
		plain := f.own(httpSpec(9001), 1)
		f.wantHealth(plain, health.Ready)
		if n := f.probe.count(plain); n != 0 {
			t.Errorf("an HTTP worker was probed %d times with checks disabled", n)
		}
	})
}

func idOf(t *testing.T, s worker.Spec) worker.ID {
	t.Helper()
	s = s.Clone()
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	return s.ID()
}
