package health

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// TestThrottleBackoff: 429 answers count healthy and push the next probe back 1, 2, 4, then 8
// sweeps; a normal answer restores the interval. Probes after the first fall on the provider's
// jitter offset.
func TestThrottleBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = 4 * time.Second
		p, rec := newFake(), newRecorder()
		c := newChecker(t, DefaultConfig(), p, rec, func(o *Options) {
			o.Modes = map[string]Mode{worker.ModeExternal: {Prober: p}}
		})
		s := worker.Spec{URL: "https://api.example.test/v1", ConnectionMode: worker.ModeExternal, Provider: "openai",
			Health: &worker.Health{DisableHealthCheck: ptr(false), CheckIntervalSecs: ptr(int(iv / time.Second)), SuccessThreshold: ptr(1)}}
		id := idOf(t, s)
		th := Throttled(429)
		p.set(id, th, th, th, th, th, nil, nil)
		c.Add(s, Pending)
		synctest.Wait()
		if st, _ := c.Status(id); st.State != Ready || st.BackoffSweeps != 1 {
			t.Fatalf("after a 429: %+v, want ready with a backoff of 1 sweep", st)
		}
		testkit.Advance(50 * iv)
		synctest.Wait()
		got := p.times(id)
		if len(got) < 7 {
			t.Fatalf("only %d probes: %v", len(got), got)
		}
		var gaps []time.Duration
		for i := 2; i < 7; i++ {
			gaps = append(gaps, got[i]-got[i-1])
		}
		if diff := cmp.Diff([]time.Duration{3 * iv, 5 * iv, 9 * iv, 9 * iv, iv}, gaps); diff != "" {
			t.Errorf("gaps between probes 2..7 (-want +got):\n%s", diff)
		}
		off := JitterOffset(id, iv)
		for _, d := range got[1:] {
			at := p.start.Add(d)
			if phase := at.Sub(time.Unix(0, 0)) % iv; phase != off {
				t.Errorf("probe at %v has phase %v, want the jitter offset %v", d, phase, off)
			}
		}
		if st, _ := c.Status(id); st.BackoffSweeps != 0 {
			t.Errorf("backoff after a normal answer = %d", st.BackoffSweeps)
		}
	})
}

// TestCallbacksMayCallBack: callbacks run outside the lock, in order, and may call the Checker.
func TestCallbacksMayCallBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFake()
		var c *Checker
		var seen []string
		c = newChecker(t, DefaultConfig(), p, nil, func(o *Options) {
			o.OnTransition = func(id worker.ID, from, to State, promo bool) {
				st, ok := c.Status(id)
				seen = append(seen, fmt.Sprintf("%v->%v ok=%v now=%v", from, to, ok, st.State))
				if to == Ready {
					c.Drain(id) // reentrant: queues more callbacks
				}
			}
			o.OnRemove = func(id worker.ID, r RemoveReason) {
				_, ok := c.Status(id)
				seen = append(seen, fmt.Sprintf("removed %v ok=%v", r, ok))
			}
		})
		s := engine(8001, &worker.Health{DrainSettleSecs: ptr(0)})
		c.Add(s, Pending)
		c.MarkReached(idOf(t, s))
		synctest.Wait()
		want := []string{
			"pending->ready ok=true now=ready",
			"ready->draining ok=false now=pending",
			"removed drained ok=false",
		}
		if diff := cmp.Diff(want, seen); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// TestLogsNeverHoldTheKey runs a worker through every kind of transition, with a prober whose
// errors echo the key, and searches the logs and the status for it.
func TestLogsNeverHoldTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const key = "sk-secret-health-key-123"
		var logs syncBuffer
		p := newFake()
		c := newChecker(t, DefaultConfig(), p, nil, func(o *Options) { o.Logger = debugLogger(&logs) })
		s := engine(8001, &worker.Health{CheckIntervalSecs: ptr(1), FailureThreshold: ptr(1), SuccessThreshold: ptr(1)})
		s.APIKey = key
		id := idOf(t, s)
		leaky := fmt.Errorf("upstream said: bad token %s", key)
		p.set(id, nil, leaky, leaky, leaky, leaky, &ProbeError{StatusCode: 401, Reason: "echo " + key}, nil)
		c.Add(s, Pending)
		testkit.Advance(4500 * time.Millisecond)
		st, _ := c.Status(id)
		if st.State != Failed || strings.Contains(st.LastError, key) || !strings.Contains(st.LastError, "[redacted]") {
			t.Errorf("status = %+v, want failed with the key redacted", st)
		}
		testkit.Advance(3 * time.Second)
		c.Drain(id)
		synctest.Wait()
		out := logs.String()
		if strings.Contains(out, key) {
			t.Errorf("key in logs:\n%s", out)
		}
		for _, want := range []string{"to=ready", "to=not_ready", "to=failed", "to=draining", "health probe passed", "worker=http://127.0.0.1:8001"} {
			if !strings.Contains(out, want) {
				t.Errorf("logs lack %q:\n%s", want, out)
			}
		}
		if n := strings.Count(out, "worker health changed"); n != 5 {
			t.Errorf("%d transition lines, want 5 (one per change):\n%s", n, out)
		}
		if strings.Contains(Target{APIKey: key}.String(), key) {
			t.Error("Target.String shows the key")
		}
	})
}

// TestProberPanicIsAFailure: a panicking prober counts as a failed probe and is logged with a
// stack; the Checker keeps running.
func TestProberPanicIsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		bad := ProberFunc(func(context.Context, Target) error { panic("boom") })
		c := newChecker(t, DefaultConfig(), bad, nil, func(o *Options) { o.Logger = debugLogger(&logs) })
		s := engine(8001, nil)
		c.Add(s, Ready)
		synctest.Wait()
		st, _ := c.Status(idOf(t, s))
		if st.ConsecutiveFailures != 1 || !strings.Contains(st.LastError, "panicked") {
			t.Errorf("status = %+v", st)
		}
		if !strings.Contains(logs.String(), "panic recovered") {
			t.Errorf("no panic log:\n%s", logs.String())
		}
	})
}

// TestCloseStopsProbesInFlight: Close cancels hung probes and waits for them.
func TestCloseStopsProbesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFake()
		c := newChecker(t, DefaultConfig(), p, nil)
		s := engine(8001, &worker.Health{TimeoutSecs: ptr(3600)})
		p.hang[idOf(t, s)] = true
		c.Add(s, Ready)
		synctest.Wait()
		start := time.Now()
		c.Close()
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %v of fake time, want none", d)
		}
		if p.inflight != 0 {
			t.Errorf("%d probes still in flight", p.inflight)
		}
		if st, ok := c.Status(idOf(t, s)); !ok || st.State != Ready {
			t.Errorf("status after Close = %+v, %v", st, ok)
		}
		if _, ok := c.Drain(idOf(t, s)); ok {
			t.Error("Drain after Close = ok")
		}
		if !errors.Is(c.Add(engine(8002, nil), Pending), ErrClosed) {
			t.Error("Add after Close did not fail")
		}
	})
}

func TestStatusesSorted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newChecker(t, DefaultConfig(), newFake(), nil)
		for i := range 5 {
			c.Add(engine(8001+i, nil), NotReady)
		}
		all := c.Statuses()
		if len(all) != 5 {
			t.Fatalf("%d statuses", len(all))
		}
		for i := 1; i < len(all); i++ {
			if all[i-1].ID >= all[i].ID {
				t.Errorf("not sorted: %s before %s", all[i-1].ID, all[i].ID)
			}
		}
	})
}

// OnProbeChange fires when a probe changes the last error or status without a state change,
// and never for a probe that changes nothing; a state change reports through OnTransition.
func TestOnProbeChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFake()
		var mu sync.Mutex
		var changes []time.Duration
		start := time.Now()
		rec := newRecorder()
		c := newChecker(t, DefaultConfig(), p, rec, func(o *Options) {
			o.OnProbeChange = func(worker.ID) {
				mu.Lock()
				defer mu.Unlock()
				changes = append(changes, time.Since(start))
			}
		})
		s := engine(8001, &worker.Health{CheckIntervalSecs: ptr(1)})
		id := idOf(t, s)
		other := &ProbeError{StatusCode: 500, Reason: "status 500"}
		// 0 ok, 1 503, 2 503 (the same), 3 ok, 4 500, 5 ok, 6 503, 7 503, 8 503 -> not_ready (F=3)
		p.set(id, nil, errDown, errDown, nil, other, nil, errDown, errDown, errDown)
		if err := c.Add(s, Ready); err != nil {
			t.Fatal(err)
		}
		testkit.Advance(8500 * time.Millisecond)
		synctest.Wait()
		mu.Lock()
		got := append([]time.Duration(nil), changes...)
		mu.Unlock()
		// The second 503 (2 s) and the pass at 0 s change nothing; the third failure in a row
		// (8 s) is a state change, reported as a transition only.
		if diff := cmp.Diff(secsList(1, 3, 4, 5, 6), got); diff != "" {
			t.Errorf("OnProbeChange times (-want +got):\n%s", diff)
		}
		if tr := rec.transitions(); len(tr) != 1 || tr[0].To != NotReady {
			t.Errorf("transitions = %+v, want one to not_ready", tr)
		}
	})
}
