package console

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestStreamSnapshotThenDeltas: a stream opens with the whole state, then carries each change
// as a delta with its transitions; closing the Hub ends it.
func TestStreamSnapshotThenDeltas(t *testing.T) {
	src := &fakeSource{st: baseState()}
	hub := NewHub(HubConfig{Source: src, Interval: 5 * time.Millisecond})
	defer hub.Close()
	base := serve(t, New(Config{Hub: hub, Auth: keyAuth("k")}))
	r := openEvents(t, base, "k")

	name, data, ok := r.next(5 * time.Second)
	var snap snapshot
	if !ok || name != "snapshot" || json.Unmarshal([]byte(data), &snap) != nil || len(snap.Workers) != 2 {
		t.Fatalf("first event %q %s", name, data)
	}
	src.update(func(s *State) { s.Workers[0].Disabled, s.Workers[0].Routable = true, false })
	name, data, _ = r.next(5 * time.Second)
	var d delta
	if name != "delta" || json.Unmarshal([]byte(data), &d) != nil {
		t.Fatalf("second event %q %s", name, data)
	}
	if d.V <= snap.V || len(d.Workers) != 1 || d.Workers[0].ID != "w1" || !d.Workers[0].Disabled ||
		len(d.Transitions) != 1 || !strings.Contains(d.Transitions[0].Text, "w1 left routing: disabled") {
		t.Fatalf("delta after the disable: %s", data)
	}
	if hub.Streams() != 1 {
		t.Errorf("%d streams open, want 1", hub.Streams())
	}
	hub.Close()
	if _, _, ok := r.next(5 * time.Second); ok {
		t.Error("the stream goes on after the hub closed")
	}
	if hub.Streams() != 0 {
		t.Errorf("%d streams open after the close", hub.Streams())
	}
}

// TestCoalesced: however many changes land within one interval, a stream gets one delta, and
// the Hub reads its source once per interval while a stream is open, once per IdleEvery
// intervals while none is.
func TestCoalesced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{st: baseState()}
		hub := NewHub(HubConfig{Source: src, Interval: 100 * time.Millisecond, IdleEvery: 10})
		defer hub.Close()
		time.Sleep(time.Second) // fake time: the idle reads
		synctest.Wait()
		if n := hub.reads.Load(); n != 1 {
			t.Errorf("%d reads in 1 s idle, want 1", n)
		}
		s := hub.subscribe()
		defer hub.unsubscribe(s)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		for i := range 10 {
			src.update(func(st *State) { st.Workers[1].Active = int64(i + 1) })
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if len(s.ch) != 1 {
			t.Fatalf("%d deltas queued after 10 changes in one interval, want 1", len(s.ch))
		}
		var d delta
		_ = json.Unmarshal([]byte(strings.TrimPrefix(strings.SplitN(string((<-s.ch).b), "\n", 3)[1], "data: ")), &d)
		if len(d.Workers) != 1 || d.Workers[0].Active != 10 {
			t.Errorf("the delta holds %+v, want w2 with 10 active", d.Workers)
		}
		before := hub.reads.Load()
		time.Sleep(time.Second)
		synctest.Wait()
		if n := hub.reads.Load() - before; n != 10 {
			t.Errorf("%d reads in 1 s with a stream open, want 10", n)
		}
	})
}

// TestSlowStreamResync: a stream whose queue is full is marked for the whole state and kicked
// instead of blocking the Hub.
func TestSlowStreamResync(t *testing.T) {
	s := &stream{ch: make(chan event, 2), kick: make(chan struct{}, 1)}
	for v := range uint64(5) {
		s.offer(event{v: v})
	}
	if len(s.ch) != 2 || !s.resync.Load() || len(s.kick) != 1 {
		t.Fatalf("queue %d, resync %v, kick %d", len(s.ch), s.resync.Load(), len(s.kick))
	}
}

// TestTransitionsBounded: the Hub keeps the source's own transitions from its first read and at
// most MaxTransitions in all, the newest.
func TestTransitionsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := baseState()
		st.Recent = []Transition{{Kind: "health", Subject: "w2", From: "pending", To: "ready", Text: "w2: health pending → ready"}}
		src := &fakeSource{st: st}
		hub := NewHub(HubConfig{Source: src, Interval: 10 * time.Millisecond, MaxTransitions: 3})
		defer hub.Close()
		s := hub.subscribe()
		defer hub.unsubscribe(s)
		b, _ := hub.Snapshot()
		var snap snapshot
		_ = json.Unmarshal(b, &snap)
		if len(snap.Transitions) != 1 || snap.Transitions[0].Kind != "health" {
			t.Fatalf("first snapshot's transitions %+v", snap.Transitions)
		}
		for i := range 5 {
			src.update(func(st *State) { st.Workers[0].Disabled, st.Workers[0].Routable = i%2 == 0, i%2 != 0 })
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
		}
		b, _ = hub.Snapshot()
		_ = json.Unmarshal(b, &snap)
		if len(snap.Transitions) != 3 || snap.Transitions[2].To != "out" {
			t.Errorf("transitions %+v, want the last 3 with the newest leaving routing", snap.Transitions)
		}
	})
}

// slowSource is a Source whose read takes cost of (fake) time.
type slowSource struct {
	fakeSource
	cost time.Duration
}

func (s *slowSource) State() State {
	time.Sleep(s.cost)
	return s.fakeSource.State()
}

// TestBudget: a read that costs more than Budget of the interval spaces the reads out, so that
// the Hub's reads stay within Budget of a core; a cheap one reads every interval.
func TestBudget(t *testing.T) {
	for _, c := range []struct {
		cost      time.Duration
		wantReads uint64 // in 10 s with a stream open
	}{{0, 40}, {20 * time.Millisecond, 5}} {
		synctest.Test(t, func(t *testing.T) {
			src := &slowSource{fakeSource: fakeSource{st: baseState()}, cost: c.cost}
			hub := NewHub(HubConfig{Source: src, Interval: 250 * time.Millisecond, Budget: 0.01})
			defer hub.Close()
			s := hub.subscribe()
			defer hub.unsubscribe(s)
			time.Sleep(10 * time.Second)
			synctest.Wait()
			if n := hub.reads.Load(); n < c.wantReads-1 || n > c.wantReads+1 {
				t.Errorf("a read of %v: %d reads in 10 s, want about %d", c.cost, n, c.wantReads)
			}
		})
	}
}
