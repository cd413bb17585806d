package consensus

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A peer is reached from its first answer until a heartbeat fails, again from its next answer,
// and nothing carries over to another leadership. The first answer of a peer not reached
// signals contact; later ones do not.
func TestHeartbeatsFollowContact(t *testing.T) {
	h := newHeartbeats()
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	fail := func(id string, when time.Time) {
		h.observe(raft.Observation{Data: raft.FailedHeartbeatObservation{PeerID: raft.ServerID(id)}}, when)
	}
	contacted := func() bool {
		select {
		case <-h.contact:
			return true
		default:
			return false
		}
	}
	steps := []struct {
		name            string
		do              func()
		id              string
		wantUnreachable bool
		wantContact     bool
	}{
		{name: "a peer just added has not answered", do: func() {}, id: "n2", wantUnreachable: true},
		{name: "its first answer reaches it", do: func() { h.answered("n2", at(0)) }, id: "n2", wantContact: true},
		{name: "more answers signal nothing", do: func() { h.answered("n2", at(10*time.Millisecond)) }, id: "n2"},
		{name: "a failed heartbeat marks it", do: func() { fail("n2", at(time.Second)) }, id: "n2", wantUnreachable: true},
		{name: "and the mark does not wear off without an answer", do: func() {}, id: "n2", wantUnreachable: true},
		{name: "raft's resumption is an answer", do: func() {
			h.observe(raft.Observation{Data: raft.ResumedHeartbeatObservation{PeerID: "n2"}}, at(5*time.Second))
		}, id: "n2", wantContact: true},
		{name: "a peer removed while failing and added again: the new loop's first answer", do: func() {
			fail("n3", at(6*time.Second))
			h.answered("n3", at(6*time.Second+100*time.Millisecond))
		}, id: "n3", wantContact: true},
		{name: "a new leadership forgets every answer", do: func() {
			h.observe(raft.Observation{Data: raft.LeaderObservation{LeaderID: "n1"}}, at(7*time.Second))
		}, id: "n2", wantUnreachable: true},
	}
	if !h.pending("n2") {
		t.Fatal("a peer neither reached nor failed is not pending")
	}
	for _, s := range steps {
		s.do()
		if got := h.unreachable(s.id); got != s.wantUnreachable {
			t.Fatalf("%s: unreachable(%s) = %v; want %v", s.name, s.id, got, s.wantUnreachable)
		}
		if got := contacted(); got != s.wantContact {
			t.Fatalf("%s: contact signalled %v; want %v", s.name, got, s.wantContact)
		}
	}
	// A peer whose heartbeats failed before any answer is unreachable, not pending: the seat
	// does not wait for it.
	fail("n4", at(8*time.Second))
	if !h.unreachable("n4") || h.pending("n4") {
		t.Fatalf("n4 after a failure: unreachable %v, pending %v; want true, false", h.unreachable("n4"), h.pending("n4"))
	}
}

// TestQuorumContact: a leader's contact with a quorum is the newest time by which enough
// voters had answered to make a quorum with it; a single voter is always in contact, and a
// leader that too few voters ever answered has none.
func TestQuorumContact(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	for _, tt := range []struct {
		name     string
		others   []raft.ServerID
		answered map[raft.ServerID]time.Time
		want     time.Time
	}{
		{"a single voter", nil, nil, now},
		{"3 voters, both answered", []raft.ServerID{"b", "c"}, map[raft.ServerID]time.Time{"b": at(-5), "c": at(-1)}, at(-1)},
		{"3 voters, one answered", []raft.ServerID{"b", "c"}, map[raft.ServerID]time.Time{"b": at(-5)}, at(-5)},
		{"3 voters, none answered", []raft.ServerID{"b", "c"}, nil, time.Time{}},
		{"5 voters: the second newest", []raft.ServerID{"b", "c", "d", "e"},
			map[raft.ServerID]time.Time{"b": at(-9), "c": at(-1), "d": at(-3), "e": at(-7)}, at(-3)},
		{"5 voters, one answered", []raft.ServerID{"b", "c", "d", "e"}, map[raft.ServerID]time.Time{"c": at(-1)}, time.Time{}},
		{"an answer from a non-voter does not count", []raft.ServerID{"b", "c"}, map[raft.ServerID]time.Time{"b": at(-4), "x": at(-1)}, at(-4)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHeartbeats()
			for id, when := range tt.answered {
				h.answered(id, when)
			}
			if got := h.quorumContact(tt.others, now); !got.Equal(tt.want) {
				t.Errorf("quorumContact = %v; want %v", got, tt.want)
			}
		})
	}
}
