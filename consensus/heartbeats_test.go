package consensus

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A peer is unreachable from its first failed heartbeat until heartbeats resume, the
// leadership changes, or unreachableFor passes without another failure.
func TestHeartbeatsMarkUnreachablePeers(t *testing.T) {
	h := newHeartbeats()
	t0 := time.Unix(1000, 0)
	fail := func(id string, at time.Time) {
		h.observe(raft.Observation{Data: raft.FailedHeartbeatObservation{PeerID: raft.ServerID(id)}}, at)
	}
	if h.unreachable("n2", t0) {
		t.Fatal("a peer with no failure is unreachable")
	}
	fail("n2", t0)
	fail("n3", t0)
	if !h.unreachable("n2", t0.Add(time.Second)) {
		t.Fatal("a peer whose heartbeat failed a second ago is reachable")
	}
	h.observe(raft.Observation{Data: raft.ResumedHeartbeatObservation{PeerID: "n2"}}, t0.Add(time.Second))
	if h.unreachable("n2", t0.Add(time.Second)) {
		t.Error("a peer whose heartbeats resumed is still unreachable")
	}
	if h.unreachable("n3", t0.Add(unreachableFor)) {
		t.Error("a failure older than unreachableFor still counts")
	}
	fail("n3", t0.Add(5*time.Second))
	h.observe(raft.Observation{Data: raft.LeaderObservation{LeaderID: "n4"}}, t0.Add(5*time.Second))
	if h.unreachable("n3", t0.Add(5*time.Second)) {
		t.Error("a failure of an earlier leadership still counts")
	}
}
