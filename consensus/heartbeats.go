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
//
// It also follows how far each peer's log is known to match this leader's (held), for the
// reconciler's rule 16: a voter whose log lacks the latest configuration entry holds the next
// voter change back (voters.Replication).
type heartbeats struct {
	mu      sync.Mutex
	failed  map[raft.ServerID]time.Time // the last failed heartbeat of each peer
	reached map[raft.ServerID]time.Time // the last answer of each peer
	held    map[raft.ServerID]uint64    // the highest index each peer's log matched, this leadership
	// awaited is the highest index holds was asked about and found missing: a peer's log
	// reaching it signals contact, so that the reconciler's next voter change follows at once.
	awaited uint64
	contact chan struct{} // a buffer of one: signals coalesce
}

func newHeartbeats() *heartbeats {
	return &heartbeats{failed: make(map[raft.ServerID]time.Time), reached: make(map[raft.ServerID]time.Time),
		held: make(map[raft.ServerID]uint64), contact: make(chan struct{}, 1)}
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
		clear(h.held)
		h.awaited = 0
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
		h.signal()
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

// matched records an AppendEntries that peer id answered: with success, its log holds every
// entry up to the last the request carried (the one before them, for a request that carried
// none; a heartbeat names none, and says nothing).
func (h *heartbeats) matched(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if !resp.Success {
		return
	}
	index := req.PrevLogEntry
	if n := len(req.Entries); n > 0 {
		index = req.Entries[n-1].Index
	}
	if index == 0 {
		return
	}
	h.mu.Lock()
	was := h.held[id]
	h.held[id] = max(was, index)
	reached := was < h.awaited && index >= h.awaited
	h.mu.Unlock()
	if reached {
		h.signal()
	}
}

// holds reports whether peer id's log is known, this leadership, to hold index. When it is not,
// the peer's log reaching index signals contact.
func (h *heartbeats) holds(id raft.ServerID, index uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held[id] >= index {
		return true
	}
	h.awaited = max(h.awaited, index)
	return false
}

// signal wakes the contact channel's reader; signals coalesce.
func (h *heartbeats) signal() {
	select {
	case h.contact <- struct{}{}:
	default:
	}
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
		t.hb.matched(id, args, resp)
	}
	return err
}

// AppendEntriesPipeline implements raft.Transport: the answers that come through the pipeline
// (raft replicates through it once a peer caught up) are recorded as AppendEntries' are.
func (t *contactTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.voteGuard.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return newMatchPipeline(p, id, t.hb), nil
}

// pipelineDepth is the buffer of a matchPipeline's answers: raft's network transport keeps as
// many requests in flight (its rpcMaxPipeline), so the relay adds no back-pressure of its own.
const pipelineDepth = 128

// matchPipeline is a raft.AppendPipeline whose answers are recorded in hb on their way to raft.
type matchPipeline struct {
	raft.AppendPipeline
	id   raft.ServerID
	hb   *heartbeats
	out  chan raft.AppendFuture
	stop chan struct{}
	once sync.Once
}

func newMatchPipeline(p raft.AppendPipeline, id raft.ServerID, hb *heartbeats) *matchPipeline {
	m := &matchPipeline{AppendPipeline: p, id: id, hb: hb, out: make(chan raft.AppendFuture, pipelineDepth), stop: make(chan struct{})}
	go m.relay()
	return m
}

// relay hands raft each answer of the pipeline, in order, after recording it, until Close.
func (m *matchPipeline) relay() {
	in := m.AppendPipeline.Consumer()
	for {
		select {
		case f := <-in:
			if f.Error() == nil { // the future is done: the transport hands over answered ones
				m.hb.matched(m.id, f.Request(), f.Response())
			}
			select {
			case m.out <- f:
			case <-m.stop:
				return
			}
		case <-m.stop:
			return
		}
	}
}

// Consumer implements raft.AppendPipeline.
func (m *matchPipeline) Consumer() <-chan raft.AppendFuture { return m.out }

// Close implements raft.AppendPipeline, and ends the relay.
func (m *matchPipeline) Close() error {
	m.once.Do(func() { close(m.stop) })
	return m.AppendPipeline.Close()
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

// RaftHoldsConfiguration reports whether this node, leading, saw peer id's log hold the last
// configuration entry committed: the peer answered with success an AppendEntries of this
// leadership that carried that entry or a later one (voters.Replication). It holds for every
// peer while no configuration entry was committed since this node started.
func (n *Node) RaftHoldsConfiguration(id string) bool {
	return n.hb.holds(raft.ServerID(id), n.fsm.ConfigurationIndex())
}

// RaftPending reports whether this node, leading, has neither an answer from peer id by raft
// nor a failed heartbeat to it yet (voters.Contact).
func (n *Node) RaftPending(id string) bool { return n.hb.pending(id) }

// RaftContact signals, coalesced, when a peer this node's raft had not reached answers
// (voters.Contact), and when a peer's log comes to hold a configuration entry
// RaftHoldsConfiguration found it lacked (voters.Replication).
func (n *Node) RaftContact() <-chan struct{} { return n.hb.contact }
