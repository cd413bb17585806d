package consensus

import (
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// heartbeats follows, while this node leads, whether its raft AppendEntries (heartbeats and
// replication) reach each peer: the transport reports each one a peer answered
// (contactTransport), and raft each heartbeat that failed (FailedHeartbeatObservation). A
// peer is reached once it answered since this leadership began and since its last failure;
// until then the voter reconciler does not promote it (Peer.Unreachable). One answer is
// enough: raft's heartbeats go out every tenth of its heartbeat timeout, so a peer that
// answered one is in contact, and waiting for more would only delay the seat. The first
// answer of a peer not reached wakes the reconciler (contact), since no membership event
// comes with it.
type heartbeats struct {
	mu      sync.Mutex
	failed  map[raft.ServerID]time.Time // the last failed heartbeat of each peer
	reached map[raft.ServerID]time.Time // the last answer of each peer
	contact chan struct{}               // a buffer of one: signals coalesce
}

func newHeartbeats() *heartbeats {
	return &heartbeats{failed: make(map[raft.ServerID]time.Time), reached: make(map[raft.ServerID]time.Time),
		contact: make(chan struct{}, 1)}
}

// observe takes one raft observation at time now: a failure, a resumption (an answer), or a
// change of leader, which forgets everything (it was another leadership's).
func (h *heartbeats) observe(o raft.Observation, now time.Time) {
	switch d := o.Data.(type) {
	case raft.FailedHeartbeatObservation:
		h.mu.Lock()
		h.failed[d.PeerID] = now
		h.mu.Unlock()
	case raft.ResumedHeartbeatObservation:
		h.answered(d.PeerID, now)
	case raft.LeaderObservation:
		h.mu.Lock()
		clear(h.failed)
		clear(h.reached)
		h.mu.Unlock()
	}
}

// answered records that peer id answered an AppendEntries at time now, and signals contact
// when it was not reached before.
func (h *heartbeats) answered(id raft.ServerID, now time.Time) {
	h.mu.Lock()
	was := h.reachedLocked(id)
	h.reached[id] = now
	h.mu.Unlock()
	if !was {
		select {
		case h.contact <- struct{}{}:
		default:
		}
	}
}

func (h *heartbeats) reachedLocked(id raft.ServerID) bool {
	r, ok := h.reached[id]
	if !ok {
		return false
	}
	f, failed := h.failed[id]
	return !failed || r.After(f)
}

// unreachable reports whether peer id has not answered since this leadership began or since
// its last failed heartbeat.
func (h *heartbeats) unreachable(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.reachedLocked(raft.ServerID(id))
}

// quorumContact returns the latest time by which enough of others (the voters but this
// leader) had answered an AppendEntries of this leadership to make a quorum with this node:
// now when it needs none (a single voter), zero when too few ever answered.
func (h *heartbeats) quorumContact(others []raft.ServerID, now time.Time) time.Time {
	need := (len(others) + 1) / 2 // a quorum of the voters (len(others)+1), less this node
	if need == 0 {
		return now
	}
	h.mu.Lock()
	at := make([]time.Time, 0, len(others))
	for _, id := range others {
		at = append(at, h.reached[id])
	}
	h.mu.Unlock()
	slices.SortFunc(at, func(a, b time.Time) int { return b.Compare(a) })
	return at[need-1]
}

// pending reports whether peer id has neither answered nor failed a heartbeat since this
// leadership began: a peer just added, whose first answer (or failure) comes within a
// heartbeat interval.
func (h *heartbeats) pending(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, answered := h.reached[raft.ServerID(id)]
	_, failed := h.failed[raft.ServerID(id)]
	return !answered && !failed
}

// contactTransport is raft's transport with the answers to this node's AppendEntries reported
// to hb: raft tells of failed heartbeats, and of the first answer after failures, but not of
// the first answer of a peer just added, which is what a promotion waits for.
type contactTransport struct {
	*voteGuard
	hb *heartbeats
}

// AppendEntries implements raft.Transport.
func (t *contactTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest,
	resp *raft.AppendEntriesResponse) error {
	err := t.voteGuard.AppendEntries(id, target, args, resp)
	if err == nil {
		t.hb.answered(id, time.Now())
	}
	return err
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

// RaftUnreachable reports whether this node, leading, has no answer from peer id by raft since
// it leads or since the peer's last failed heartbeat (voters.Contact).
func (n *Node) RaftUnreachable(id string) bool { return n.hb.unreachable(id) }

// RaftPending reports whether this node, leading, has neither an answer from peer id by raft
// nor a failed heartbeat to it yet (voters.Contact).
func (n *Node) RaftPending(id string) bool { return n.hb.pending(id) }

// RaftContact signals, coalesced, when a peer this node's raft had not reached answers
// (voters.Contact).
func (n *Node) RaftContact() <-chan struct{} { return n.hb.contact }
