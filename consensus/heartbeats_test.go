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
