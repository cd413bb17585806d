package health

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

var errDown = &ProbeError{StatusCode: 503, Reason: "status 503"}

func TestNewWorkerProbedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFake()
		c := newChecker(t, DefaultConfig(), p, nil)
		s := engine(8001, nil)
		if err := c.Add(s, Pending); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if diff := cmp.Diff(secsList(0), p.times(idOf(t, s))); diff != "" {
			t.Errorf("probe times (-want +got):\n%s", diff)
		}
		st, _ := c.Status(idOf(t, s))
		if st.ConsecutiveSuccesses != 1 || st.LastProbe.IsZero() || !st.Probed {
			t.Errorf("status after one probe = %+v", st)
		}
	})
}

func TestEachWorkerOnItsOwnInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFake()
		c := newChecker(t, DefaultConfig(), p, nil)
		a := engine(8001, &worker.Health{CheckIntervalSecs: ptr(1)})
		b := engine(8002, &worker.Health{CheckIntervalSecs: ptr(3)})
		c.Add(a, Pending)
		testkit.Advance(500 * time.Millisecond)
		c.Add(b, Pending) // b's turns count from its own start
		testkit.Advance(6200 * time.Millisecond)
		synctest.Wait()
		if diff := cmp.Diff(secsList(0, 1, 2, 3, 4, 5, 6), p.times(idOf(t, a))); diff != "" {
			t.Errorf("a (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(secsList(0.5, 3.5, 6.5), p.times(idOf(t, b))); diff != "" {
			t.Errorf("b (-want +got):\n%s", diff)
		}
	})
}

// TestHangingWorkerDelaysNoOther: one worker's probe hangs until its timeout; the other keeps its
// schedule, and the hanging one is not probed twice at once.
func TestHangingWorkerDelaysNoOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFake()
		c := newChecker(t, DefaultConfig(), p, nil)
		slow := engine(8001, &worker.Health{CheckIntervalSecs: ptr(2), TimeoutSecs: ptr(3)})
		fast := engine(8002, &worker.Health{CheckIntervalSecs: ptr(1)})
		p.hang[idOf(t, slow)] = true
		c.Add(slow, Ready)
		c.Add(fast, Ready)
		testkit.Advance(3500 * time.Millisecond)
		synctest.Wait()
		if diff := cmp.Diff(secsList(0), p.times(idOf(t, slow))); diff != "" {
			t.Errorf("slow probed again while in flight (-want +got):\n%s", diff)
		}
		st, _ := c.Status(idOf(t, slow))
		if st.LastError != "timeout" || st.ConsecutiveFailures != 1 {
			t.Errorf("slow status = %+v, want a timeout failure", st)
		}
		testkit.Advance(2 * time.Second)
		synctest.Wait()
		if diff := cmp.Diff(secsList(0, 4), p.times(idOf(t, slow))); diff != "" {
			t.Errorf("slow (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(secsList(0, 1, 2, 3, 4, 5), p.times(idOf(t, fast))); diff != "" {
			t.Errorf("fast delayed by slow (-want +got):\n%s", diff)
		}
	})
}

func TestInFlightCapHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFake()
		p.release = make(chan struct{})
		c := newChecker(t, DefaultConfig(), p, nil, func(o *Options) { o.MaxInFlight = 2 })
		var ids []worker.ID
		for i := range 5 {
			s := engine(8001+i, nil)
			ids = append(ids, idOf(t, s))
			c.Add(s, Pending)
		}
		synctest.Wait()
		p.mu.Lock()
		inflight := p.inflight
		p.mu.Unlock()
		if inflight != 2 {
			t.Errorf("in flight = %d, want 2", inflight)
		}
		close(p.release)
		synctest.Wait()
		for _, id := range ids {
			if got := len(p.times(id)); got != 1 {
				t.Errorf("%s probed %d times, want 1", id, got)
			}
		}
		if p.peak != 2 {
			t.Errorf("peak in flight = %d, want 2", p.peak)
		}
	})
}

func TestDrain(t *testing.T) {
	tests := []struct {
		name       string
		initial    State
		settleSecs *int
		wantSettle time.Duration
	}{
		{"ready_waits_settle", Ready, ptr(3), 3 * time.Second},
		{"ready_default_settle", Ready, nil, 5 * time.Second},
		{"ready_zero_settle_removes_at_once", Ready, ptr(0), 0},
		{"not_ready_removed_at_once", NotReady, ptr(3), 0},
		{"pending_removed_at_once", Pending, ptr(3), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, rec := newFake(), newRecorder()
				c := newChecker(t, DefaultConfig(), p, rec)
				s := engine(8001, &worker.Health{CheckIntervalSecs: ptr(1), DrainSettleSecs: tc.settleSecs})
				id := idOf(t, s)
				p.set(id, errDown) // failing probes must not move a draining worker
				c.Add(s, tc.initial)
				testkit.Advance(1500 * time.Millisecond)
				probes := len(p.times(id))
				settle, ok := c.Drain(id)
				if !ok || settle != tc.wantSettle {
					t.Fatalf("Drain = %v, %v; want %v, true", settle, ok, tc.wantSettle)
				}
				if tc.wantSettle > 0 {
					testkit.Advance(tc.wantSettle - time.Millisecond)
					synctest.Wait()
					if got := rec.removals(); len(got) != 0 {
						t.Fatalf("removed before the settle period: %+v", got)
					}
					if st, _ := c.Status(id); st.State != Draining {
						t.Errorf("state while settling = %v", st.State)
					}
				}
				testkit.Advance(2 * time.Millisecond)
				synctest.Wait()
				want := []removal{{id, RemovedDrained, 1500*time.Millisecond + tc.wantSettle}}
				if diff := cmp.Diff(want, rec.removals()); diff != "" {
					t.Errorf("removals (-want +got):\n%s", diff)
				}
				if got := len(p.times(id)); got != probes {
					t.Errorf("probed while draining: %d probes, had %d", got, probes)
				}
				if _, ok := c.Status(id); ok {
					t.Error("still checked after removal")
				}
				tr := rec.transitions()
				if last := tr[len(tr)-1]; last.To != Draining {
					t.Errorf("last transition %+v, want to draining", last)
				}
			})
		})
	}
}

// TestDrainFor: a drain decided elsewhere (a record draining in raft) moves a worker of any
// state to draining, stops its probes, and removes it exactly when the settle given has passed,
// at once for none; a second DrainFor keeps the first settle. A worker added draining is never
// probed.
func TestDrainFor(t *testing.T) {
	tests := []struct {
		name    string
		initial State
		settle  time.Duration
	}{
		{"ready", Ready, 3 * time.Second},
		{"pending", Pending, 3 * time.Second},
		{"not_ready", NotReady, 3 * time.Second},
		{"failed", Failed, 3 * time.Second},
		{"added_draining", Draining, 3 * time.Second},
		{"deadline_passed", Ready, 0},
		{"added_draining_deadline_passed", Draining, -time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, rec := newFake(), newRecorder()
				c := newChecker(t, DefaultConfig(), p, rec)
				s := engine(8001, &worker.Health{CheckIntervalSecs: ptr(1)})
				id := idOf(t, s)
				p.set(id, errDown)
				if err := c.Add(s, tc.initial); err != nil {
					t.Fatal(err)
				}
				testkit.Advance(500 * time.Millisecond)
				probes := len(p.times(id))
				if tc.initial == Draining && probes != 0 {
					t.Fatalf("a worker added draining was probed %d times", probes)
				}
				if !c.DrainFor(id, tc.settle) {
					t.Fatal("DrainFor = false")
				}
				want := max(tc.settle, 0)
				if want > 0 {
					testkit.Advance(time.Second)
					if !c.DrainFor(id, time.Hour) {
						t.Fatal("second DrainFor = false")
					}
					testkit.Advance(want - time.Second - time.Millisecond)
					synctest.Wait()
					if got := rec.removals(); len(got) != 0 {
						t.Fatalf("removed before the settle: %+v", got)
					}
					if st, _ := c.Status(id); st.State != Draining {
						t.Errorf("state while settling = %v", st.State)
					}
					testkit.Advance(2 * time.Millisecond)
				}
				synctest.Wait()
				wantRm := []removal{{id, RemovedDrained, 500*time.Millisecond + want}}
				if diff := cmp.Diff(wantRm, rec.removals()); diff != "" {
					t.Errorf("removals (-want +got):\n%s", diff)
				}
				if got := len(p.times(id)); got != probes {
					t.Errorf("probed while draining: %d probes, had %d", got, probes)
				}
				if c.DrainFor(id, time.Second) {
					t.Error("DrainFor of a removed worker = true")
				}
			})
		})
	}
}

func TestAutoRemovalOnFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.RemoveUnhealthyWorkers = true
		p, rec := newFake(), newRecorder()
		c := newChecker(t, cfg, p, rec)
		s := engine(8001, &worker.Health{CheckIntervalSecs: ptr(1), FailureThreshold: ptr(1)})
		id := idOf(t, s)
		p.set(id, errDown)
		c.Add(s, Ready)
		testkit.Advance(10 * time.Second)
		synctest.Wait()
		// F=1: not_ready at the 1st failure, failed at the 4th (4F), then removed.
		want := []trans{{id, Ready, NotReady, false, 0}, {id, NotReady, Failed, false, 3 * time.Second}}
		if diff := cmp.Diff(want, rec.transitions()); diff != "" {
			t.Errorf("transitions (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]removal{{id, RemovedFailed, 3 * time.Second}}, rec.removals()); diff != "" {
			t.Errorf("removals (-want +got):\n%s", diff)
		}
		if n := len(p.times(id)); n != 4 {
			t.Errorf("%d probes, want 4 (none after removal)", n)
		}
	})
}

func TestCarriedOverFailedIsRemovedWithAutoRemoval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.RemoveUnhealthyWorkers = true
		p, rec := newFake(), newRecorder()
		c := newChecker(t, cfg, p, rec)
		s := engine(8001, nil)
		if err := c.Add(s, Failed); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if diff := cmp.Diff([]removal{{idOf(t, s), RemovedFailed, 0}}, rec.removals()); diff != "" {
			t.Errorf("removals (-want +got):\n%s", diff)
		}
		if n := len(p.times(idOf(t, s))); n != 0 {
			t.Errorf("%d probes of a removed worker", n)
		}
	})
}

func TestFailedWorkerRejoinsWithoutAutoRemoval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, rec := newFake(), newRecorder()
		c := newChecker(t, DefaultConfig(), p, rec)
		s := engine(8001, &worker.Health{CheckIntervalSecs: ptr(1), FailureThreshold: ptr(1), SuccessThreshold: ptr(2)})
		id := idOf(t, s)
		p.set(id, errDown, errDown, errDown, errDown, errDown, nil)
		c.Add(s, Ready)
		testkit.Advance(6500 * time.Millisecond)
		synctest.Wait()
		want := []trans{
			{id, Ready, NotReady, false, 0},
			{id, NotReady, Failed, false, 3 * time.Second},
			{id, Failed, Ready, true, 6 * time.Second}, // 2 successes at 5 s and 6 s
		}
		if diff := cmp.Diff(want, rec.transitions()); diff != "" {
			t.Errorf("transitions (-want +got):\n%s", diff)
		}
		if len(rec.removals()) != 0 {
			t.Errorf("removed without --remove-unhealthy-workers: %+v", rec.removals())
		}
		st, _ := c.Status(id)
		if st.State != Ready || st.LastError != "" || st.LastStatusCode != 0 {
			t.Errorf("status = %+v", st)
		}
	})
}

func TestDisabledChecks(t *testing.T) {
	tests := []struct {
		name       string
		globalOff  bool
		spec       worker.Spec
		mode       Mode
		wantProbed bool
		wantState  State
	}{
		{"flag_off_engine_ready_unprobed", true, engine(8001, nil), Mode{}, false, Ready},
		{"worker_off_engine_ready_unprobed", false, engine(8001, &worker.Health{DisableHealthCheck: ptr(true)}), Mode{}, false, Ready},
		{"worker_on_beats_flag_off", true, engine(8001, &worker.Health{DisableHealthCheck: ptr(false)}), Mode{}, true, Pending},
		{"external_unprobed_by_default", false,
			worker.Spec{URL: "https://api.example.test/v1", ConnectionMode: worker.ModeExternal, Provider: "openai"}, Mode{}, false, Ready},
		{"external_probed_when_explicitly_on", false,
			worker.Spec{URL: "https://api.example.test/v1", ConnectionMode: worker.ModeExternal, Provider: "openai",
				Health: &worker.Health{DisableHealthCheck: ptr(false)}}, Mode{}, true, Pending},
		{"zmq_probed_even_when_flag_off", true,
			worker.Spec{URL: "tcp://127.0.0.1:5555", ConnectionMode: worker.ModeZMQ}, Mode{ProbeWhenDisabled: true}, true, Pending},
		{"zmq_probed_even_when_worker_off", false,
			worker.Spec{URL: "ipc:///tmp/engine.sock", Health: &worker.Health{DisableHealthCheck: ptr(true)}}, Mode{ProbeWhenDisabled: true}, true, Pending},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.DisableHealthCheck = tc.globalOff
				p := newFake()
				m := tc.mode
				m.Prober = p
				c := newChecker(t, cfg, p, nil, func(o *Options) {
					o.Modes = map[string]Mode{worker.ModeHTTP: m, worker.ModeExternal: m, worker.ModeZMQ: m}
				})
				id := idOf(t, tc.spec)
				p.set(id, errDown)
				if err := c.Add(tc.spec, Pending); err != nil {
					t.Fatal(err)
				}
				testkit.Advance(3 * time.Minute)
				synctest.Wait()
				st, _ := c.Status(id)
				probes := len(p.times(id))
				if st.Probed != tc.wantProbed || (probes > 0) != tc.wantProbed {
					t.Errorf("Probed = %v with %d probes, want probed %v", st.Probed, probes, tc.wantProbed)
				}
				if st.State != tc.wantState {
					t.Errorf("state = %v, want %v", st.State, tc.wantState)
				}
			})
		})
	}
}

func TestNoProberStaysPendingUntilReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, rec := newFake(), newRecorder()
		c := newChecker(t, DefaultConfig(), p, rec)
		s := worker.Spec{URL: "tcp://127.0.0.1:5555"} // zmq: no prober registered
		id := idOf(t, s)
		c.Add(s, Pending)
		testkit.Advance(time.Hour)
		if st, _ := c.Status(id); st.State != Pending || st.Probed {
			t.Fatalf("status = %+v, want pending and unprobed", st)
		}
		if !c.MarkReached(id) {
			t.Fatal("MarkReached = false")
		}
		synctest.Wait()
		want := []trans{{id, Pending, Ready, true, time.Hour}}
		if diff := cmp.Diff(want, rec.transitions()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if c.MarkReached("w-000000000000") {
			t.Error("MarkReached of an unknown worker = true")
		}
	})
}

// TestUpdateKeepsState patches thresholds and the interval in place: the counts carry over.
func TestUpdateKeepsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, rec := newFake(), newRecorder()
		c := newChecker(t, DefaultConfig(), p, rec)
		s := engine(8001, &worker.Health{CheckIntervalSecs: ptr(1), FailureThreshold: ptr(3)})
		id := idOf(t, s)
		p.set(id, errDown)
		c.Add(s, Ready)
		testkit.Advance(1500 * time.Millisecond) // failures at 0 s and 1 s
		s.Health = &worker.Health{CheckIntervalSecs: ptr(10), FailureThreshold: ptr(5)}
		if err := c.Update(s); err != nil {
			t.Fatal(err)
		}
		st, _ := c.Status(id)
		if st.State != Ready || st.ConsecutiveFailures != 2 {
			t.Fatalf("after update: %+v, want ready with 2 failures", st)
		}
		testkit.Advance(35 * time.Second) // new interval: failures at 11.5, 21.5, 31.5 s
		synctest.Wait()
		if diff := cmp.Diff(secsList(0, 1, 11.5, 21.5, 31.5), p.times(id)); diff != "" {
			t.Errorf("probe times (-want +got):\n%s", diff)
		}
		want := []trans{{id, Ready, NotReady, false, 31500 * time.Millisecond}} // the 5th failure
		if diff := cmp.Diff(want, rec.transitions()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if err := c.Update(engine(9999, nil)); err == nil {
			t.Error("Update of an unknown worker did not fail")
		}
	})
}

func TestUpdateTogglesChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, rec := newFake(), newRecorder()
		c := newChecker(t, DefaultConfig(), p, rec)
		s := engine(8001, &worker.Health{CheckIntervalSecs: ptr(1)})
		id := idOf(t, s)
		p.set(id, errDown)
		c.Add(s, NotReady)
		testkit.Advance(1500 * time.Millisecond)
		s.Health.DisableHealthCheck = ptr(true)
		c.Update(s)
		synctest.Wait()
		n := len(p.times(id))
		testkit.Advance(10 * time.Second)
		if got := len(p.times(id)); got != n {
			t.Errorf("probed %d times after checks were disabled", got-n)
		}
		s.Health.DisableHealthCheck = ptr(false)
		c.Update(s) // re-enabled: probed at once
		synctest.Wait()
		if got := len(p.times(id)); got != n+1 {
			t.Errorf("%d probes after re-enabling, want 1", got-n)
		}
		want := []trans{{id, NotReady, Ready, true, 1500 * time.Millisecond}}
		if diff := cmp.Diff(want, rec.transitions()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestRemoveForgetsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, rec := newFake(), newRecorder()
		c := newChecker(t, DefaultConfig(), p, rec)
		s := engine(8001, &worker.Health{CheckIntervalSecs: ptr(1)})
		id := idOf(t, s)
		p.hang[id] = true
		c.Add(s, Ready)
		synctest.Wait()
		if !c.Remove(id) {
			t.Fatal("Remove = false")
		}
		if c.Remove(id) {
			t.Error("second Remove = true")
		}
		testkit.Advance(time.Minute) // the hung probe times out; its result is dropped
		synctest.Wait()
		if n := len(p.times(id)); n != 1 {
			t.Errorf("%d probes, want 1", n)
		}
		if len(rec.transitions())+len(rec.removals()) != 0 {
			t.Errorf("callbacks after Remove: %+v %+v", rec.transitions(), rec.removals())
		}
		if err := c.Add(s, Pending); err != nil {
			t.Errorf("re-Add after Remove: %v", err)
		}
	})
}

func TestAddRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newChecker(t, DefaultConfig(), newFake(), nil)
		if err := c.Add(engine(8001, nil), Draining+1); err == nil {
			t.Error("Add in an unknown state did not fail")
		}
		var fe *worker.FieldError
		if err := c.Add(worker.Spec{URL: "ftp://x"}, Pending); !errors.As(err, &fe) {
			t.Errorf("Add of a bad spec = %v, want a FieldError", err)
		}
		c.Add(engine(8001, nil), Pending)
		if err := c.Add(engine(8001, nil), Pending); err == nil {
			t.Error("second Add did not fail")
		}
		c.Close()
		if err := c.Add(engine(8002, nil), Pending); !errors.Is(err, ErrClosed) {
			t.Errorf("Add after Close = %v", err)
		}
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New with a zero Config did not fail")
	}
}
