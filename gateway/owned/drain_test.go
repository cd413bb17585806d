package owned

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// TestDrain: a worker whose record is draining is not probed, reads draining, and is removed
// through OnRemove (with its epoch) exactly when the record's settle has passed since the drain
// started, whatever its health, whether this gateway owned it before (the DELETE's owner) or
// only learns of it draining (a restart, a failover), and whatever happens to it meanwhile.
func TestDrain(t *testing.T) {
	const settle = 5 * time.Second
	tests := []struct {
		name string
		// before runs ahead of Drain: it owns the worker, or not (a restart).
		before func(f *fixture, s worker.Spec)
		// since is when the drain started, relative to the call of Drain.
		since time.Duration
		// during runs one second into the drain.
		during func(f *fixture, s worker.Spec, start time.Time)
		// left is when the removal comes, after the call of Drain.
		left time.Duration
	}{
		{name: "ready", before: ownReady, left: settle},
		{name: "pending", before: ownPending, left: settle},
		{name: "quarantined", before: func(f *fixture, s worker.Spec) { put(f, s); f.m.Own(s, 7, true) }, left: settle},
		{name: "not owned before (restart)", before: put, since: -2 * time.Second, left: 3 * time.Second},
		{name: "settle passed (restart)", before: put, since: -time.Minute, left: 0},
		{name: "settle passed, owned", before: ownReady, since: -settle, left: 0},
		{name: "a clock ahead waits no more than the settle", before: ownReady, since: time.Hour, left: settle},
		{name: "drain again keeps the first deadline", before: ownReady, left: settle,
			during: func(f *fixture, s worker.Spec, _ time.Time) { f.m.Drain(s, 7, false, time.Now(), settle) }},
		{name: "own again keeps the drain", before: ownReady, left: settle,
			during: func(f *fixture, s worker.Spec, _ time.Time) { f.m.Own(s, 7, false) }},
		{name: "quarantine keeps the drain", before: ownReady, left: settle,
			during: func(f *fixture, s worker.Spec, start time.Time) { f.m.Drain(s, 7, true, start, settle) }},
		{name: "patch keeps the drain", before: ownReady, left: settle,
			during: func(f *fixture, s worker.Spec, start time.Time) {
				s.Priority = new(int)
				*s.Priority = 9
				put(f, s)
				f.m.Drain(s, 7, false, start, settle)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t)
				s := httpSpec(9001)
				id := idOf(t, s)
				tt.before(f, s)
				synctest.Wait()
				probes := f.probe.count(id)
				start := time.Now()
				f.m.Drain(s, 7, false, start.Add(tt.since), settle)
				synctest.Wait()
				want := []string{fmt.Sprintf("%s 7 drained", id)}
				if tt.left == 0 {
					if diff := cmp.Diff(want, f.removedCopy()); diff != "" {
						t.Fatalf("OnRemove calls (-want +got):\n%s", diff)
					}
					if _, ok := f.m.Status(id); ok {
						t.Error("still owned after its removal")
					}
					return
				}
				f.wantHealth(id, health.Draining)
				if tt.during != nil {
					testkit.Advance(time.Second)
					tt.during(f, s, start.Add(tt.since))
				}
				testkit.Advance(time.Until(start.Add(tt.left)) - time.Millisecond)
				if got := f.removedCopy(); len(got) != 0 {
					t.Fatalf("removed before the settle passed: %v", got)
				}
				f.wantHealth(id, health.Draining)
				testkit.Advance(2 * time.Millisecond)
				if diff := cmp.Diff(want, f.removedCopy()); diff != "" {
					t.Errorf("OnRemove calls (-want +got):\n%s", diff)
				}
				if got := f.probe.count(id); got != probes {
					t.Errorf("probed while draining: %d probes, had %d", got, probes)
				}
				if _, ok := f.m.Status(id); ok {
					t.Error("still owned after its removal")
				}
			})
		})
	}
}

// TestDrainDisowned: a worker whose ownership moves away while it drains is left to its new
// owner: this gateway never removes it.
func TestDrainDisowned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		s := httpSpec(9001)
		id := idOf(t, s)
		ownReady(f, s)
		f.m.Drain(s, 7, false, time.Now(), 5*time.Second)
		testkit.Advance(time.Second)
		f.m.Disown(id)
		testkit.Advance(time.Minute)
		if got := f.removedCopy(); len(got) != 0 {
			t.Errorf("a disowned worker was removed: %v", got)
		}
	})
}

func TestDrainLeft(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		since  time.Time
		settle time.Duration
		want   time.Duration
	}{
		{"just started", now, 5 * time.Second, 5 * time.Second},
		{"part way", now.Add(-2 * time.Second), 5 * time.Second, 3 * time.Second},
		{"passed", now.Add(-time.Hour), 5 * time.Second, 0},
		{"clock ahead", now.Add(time.Hour), 5 * time.Second, 5 * time.Second},
		{"no settle", now, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := drainLeft(tt.since, tt.settle, now); got != tt.want {
				t.Errorf("drainLeft = %v, want %v", got, tt.want)
			}
		})
	}
}

// put adds s to the pool without owning it.
func put(f *fixture, s worker.Spec) {
	f.t.Helper()
	if _, _, err := f.pool.Upsert(s, pool.OriginLocal); err != nil {
		f.t.Fatal(err)
	}
}

// ownReady owns s at epoch 7; its first probe passes.
func ownReady(f *fixture, s worker.Spec) {
	f.t.Helper()
	put(f, s)
	f.m.Own(s, 7, false)
	synctest.Wait()
	f.wantHealth(idOf(f.t, s), health.Ready)
}

// ownPending owns s at epoch 7; its probes fail.
func ownPending(f *fixture, s worker.Spec) {
	f.t.Helper()
	f.probe.set(idOf(f.t, s), errDown)
	put(f, s)
	f.m.Own(s, 7, false)
	synctest.Wait()
	f.wantHealth(idOf(f.t, s), health.Pending)
}

// TestDrainEndsTheBulletin: the last note a drained worker leaves is OnForget (its bulletin
// ends), never an OnChange after it, also when the drain ends at once.
func TestDrainEndsTheBulletin(t *testing.T) {
	for _, since := range []time.Duration{-time.Minute, 0} {
		t.Run(fmt.Sprint("since ", since), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var notes []string
				note := func(what string) func(worker.ID) {
					return func(worker.ID) { mu.Lock(); notes = append(notes, what); mu.Unlock() }
				}
				f := newFixture(t, func(o *Options) { o.OnChange, o.OnForget = note("change"), note("forget") })
				s := httpSpec(9001)
				ownReady(f, s)
				f.m.Drain(s, 7, false, time.Now().Add(since), 5*time.Second)
				testkit.Advance(time.Minute)
				mu.Lock()
				defer mu.Unlock()
				if len(notes) == 0 || notes[len(notes)-1] != "forget" {
					t.Errorf("notes %v, want forget last", notes)
				}
			})
		})
	}
}
