package consensus

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// unreachableFor is how long after its last failed heartbeat the leader counts a peer
// unreachable, unless heartbeats resumed since. It is longer than raft's heartbeat backoff (at
// most HeartbeatTimeout/2), so a peer that keeps failing stays marked; and short, so that a peer
// removed and added again (a new heartbeat loop, which reports no resumption) is not kept out
// for long.
const unreachableFor = 3 * time.Second

// heartbeats follows this node's raft heartbeats to each peer while it leads: raft reports each
// failure (FailedHeartbeatObservation) and the first success after failures
// (ResumedHeartbeatObservation). The voter reconciler promotes no peer it marks (Peer.Unreachable).
type heartbeats struct {
	mu     sync.Mutex
	failed map[raft.ServerID]time.Time // the last failure of each peer not resumed since
}

func newHeartbeats() *heartbeats { return &heartbeats{failed: make(map[raft.ServerID]time.Time)} }

// observe takes one raft observation at time now; a change of leader forgets every failure (they
// were another leadership's).
func (h *heartbeats) observe(o raft.Observation, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch d := o.Data.(type) {
	case raft.FailedHeartbeatObservation:
		h.failed[d.PeerID] = now
	case raft.ResumedHeartbeatObservation:
		delete(h.failed, d.PeerID)
	case raft.LeaderObservation:
		clear(h.failed)
	}
}

// unreachable reports whether the heartbeats to peer id failed within unreachableFor of now and
// did not resume since.
func (h *heartbeats) unreachable(id string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.failed[raft.ServerID(id)]
	return ok && now.Sub(t) < unreachableFor
}

// followHeartbeats feeds n's heartbeats from raft's observations until the node stops.
func (n *Node) followHeartbeats() {
	defer n.wg.Done()
	defer n.recoverLog("heartbeat observer")
	ch := make(chan raft.Observation, 64)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.LeaderObservation:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	for {
		select {
		case <-n.stop:
			return
		case o := <-ch:
			n.hb.observe(o, time.Now())
		}
	}
}

// raftUnreachable reports whether this node, leading, cannot reach peer id by raft (heartbeats).
func (n *Node) raftUnreachable(id string) bool { return n.hb.unreachable(id, time.Now()) }
