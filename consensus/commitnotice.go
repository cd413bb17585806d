package consensus

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Pacing of a commit notice that names an entry this node's log does not hold yet.
const (
	// noticeRetryFirst is the first wait before the relay looks at the log again: the entry
	// is on its way from the leader, usually already stored.
	noticeRetryFirst = 200 * time.Microsecond
	// noticeRetryFor bounds the retries of one notice; past it, raft's own AppendEntries
	// (the next write, or CommitTimeout) tells this node.
	noticeRetryFor = 200 * time.Millisecond
	// noticeDeliverTimeout bounds the wait for raft's main loop to take a notice.
	noticeDeliverTimeout = time.Second
)

// CommitNotice is the leader's word that an entry committed (api/consensus/v1 CommitNotice):
// From, leading in LeaderTerm, applied the entry at Index, whose term is EntryTerm.
type CommitNotice struct {
	From       string
	Index      uint64
	EntryTerm  uint64
	LeaderTerm uint64
}

// commitRelay hands this node's raft the commit notices of its leader. hashicorp/raft tells a
// follower the commit index only with the leader's next AppendEntries: the next write, or
// CommitTimeout (50 to 100 ms) later. So a follower would apply a write only once the next one
// came, and a fleet-acknowledged write would wait that long, or for a Barrier entry the leader
// appended after each write (two more log appends in a row, each with its fsyncs).
//
// The leader instead pushes a notice each time its FSM applies an entry (LeaderNotice), on the
// WatchApplied stream its followers keep open (consensus/fleetack), and the relay delivers it to
// raft as the AppendEntries the leader would have sent at its next CommitTimeout: no entries, the
// notice's entry as the previous one, and its index as the leader's commit index. raft checks it as
// any AppendEntries: a term below its own is ignored; an entry of another term at that index is
// refused. The relay delivers only what raft would accept from that leader: this node follows, in
// the notice's term, the leader that sent it, and its log holds the notice's entry with the same
// term, so by raft's log matching its log up to that entry is the leader's, all committed. A notice
// for an entry not stored yet is tried again as the log grows, for noticeRetryFor.
//
// A notice delivered also goes to keepCommit, which stores the commit index while raft applies
// the entry, rather than after.
type commitRelay struct {
	n    *Node
	mu   sync.Mutex
	next CommitNotice // the latest notice not delivered yet; index 0 when none
	wake chan struct{}

	// delivered is the last notice delivered, and deliveredSig is closed and replaced after
	// each (keepCommit).
	delivered    atomic.Pointer[CommitNotice]
	deliveredSig atomic.Pointer[chan struct{}]
}

func newCommitRelay(n *Node) *commitRelay {
	r := &commitRelay{n: n, wake: make(chan struct{}, 1)}
	sig := make(chan struct{})
	r.deliveredSig.Store(&sig)
	return r
}

// lastDelivered returns the last notice delivered (zero: none) and a channel closed at the next.
func (r *commitRelay) lastDelivered() (CommitNotice, <-chan struct{}) {
	sig := *r.deliveredSig.Load() // before the notice: none slips between
	if c := r.delivered.Load(); c != nil {
		return *c, sig
	}
	return CommitNotice{}, sig
}

// offer queues a notice, replacing an older one: a later commit index covers an earlier one.
func (r *commitRelay) offer(c CommitNotice) {
	r.mu.Lock()
	if c.Index <= r.next.Index && c.LeaderTerm <= r.next.LeaderTerm {
		r.mu.Unlock()
		return
	}
	r.next = c
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// take returns the queued notice and clears it.
func (r *commitRelay) take() CommitNotice {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.next
	r.next = CommitNotice{}
	return c
}

// run delivers the notices until stop.
func (r *commitRelay) run(stop <-chan struct{}) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var pending CommitNotice // a notice whose entry this node's log lacks
	var since time.Time
	wait := noticeRetryFirst
	for {
		select {
		case <-stop:
			return
		case <-r.wake:
			if c := r.take(); c.LeaderTerm > pending.LeaderTerm || c.Index > pending.Index {
				pending, since, wait = c, time.Now(), noticeRetryFirst
			}
		case <-retry.C:
		}
		if pending.Index == 0 {
			continue
		}
		switch r.n.deliverNotice(pending, stop) {
		case noticeLacksEntry:
			if time.Since(since) < noticeRetryFor {
				retry.Reset(wait)
				wait *= 2
				continue
			}
		case noticeDelivered:
			c := pending
			r.delivered.Store(&c)
			next := make(chan struct{})
			close(*r.deliveredSig.Swap(&next))
		}
		pending = CommitNotice{}
	}
}

// noticeOutcome is what deliverNotice did with a notice.
type noticeOutcome int

const (
	noticeDelivered  noticeOutcome = iota
	noticeStale                    // not this node's leader and term, or already committed here
	noticeLacksEntry               // this node's log has no entry at the notice's index yet
	noticeConflicts                // this node's entry at that index has another term
)

// deliverNotice hands raft the AppendEntries a commit notice stands for, when raft would take
// it from the notice's sender (see commitRelay).
func (n *Node) deliverNotice(c CommitNotice, stop <-chan struct{}) noticeOutcome {
	if n.raft.State() != raft.Follower || n.raft.CurrentTerm() != c.LeaderTerm || n.raft.CommitIndex() >= c.Index {
		return noticeStale
	}
	addr, id := n.raft.LeaderWithID()
	if addr == "" || string(id) != c.From {
		return noticeStale
	}
	var l raft.Log
	if err := n.stores.log.GetLog(c.Index, &l); err != nil {
		return noticeLacksEntry
	}
	if l.Term != c.EntryTerm {
		return noticeConflicts
	}
	leader := n.trans.EncodePeer(id, addr)
	rpc := raft.RPC{
		Command: &raft.AppendEntriesRequest{
			RPCHeader:    raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: leader},
			Term:         c.LeaderTerm,
			PrevLogEntry: c.Index, PrevLogTerm: c.EntryTerm, LeaderCommitIndex: c.Index,
		},
		RespChan: make(chan raft.RPCResponse, 1), // raft answers without waiting; nobody reads it
	}
	if !n.guard.deliver(rpc, stop, noticeDeliverTimeout) {
		return noticeStale
	}
	return noticeDelivered
}

// LeaderNotice is the commit notice for the last entry this node's FSM applied, when it leads.
// The term is read before and after the state, so that the notice names a term in which this
// node led (raft changes the state before the term when it steps down).
func (n *Node) LeaderNotice() (CommitNotice, bool) {
	term := n.raft.CurrentTerm()
	if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
		return CommitNotice{}, false
	}
	index, entryTerm := n.fsm.AppliedEntry()
	if entryTerm == 0 {
		return CommitNotice{}, false // loaded or restored, not applied: its term is not known
	}
	return CommitNotice{From: n.ID(), Index: index, EntryTerm: entryTerm, LeaderTerm: term}, true
}

// OfferNotice passes a commit notice its leader sent to the relay, which hands it to raft when
// raft would take it from that leader.
func (n *Node) OfferNotice(c CommitNotice) {
	if n.relay != nil {
		n.relay.offer(c)
	}
}

// keepCommit makes durable that an entry committed (storage.Store.SaveCommit), after each
// entry the FSM applies and each commit notice the relay delivers: a restart then applies it
// before any leader exists (replay.go), and an acknowledgement, which waits for that
// (WaitSaved), needs no further append to carry the commit index. A notice's save runs while
// raft applies its entry. Saves coalesce: one per wake-up, for the highest entry known.
func (n *Node) keepCommit() {
	defer n.wg.Done()
	defer n.recoverLog("commit keeper")
	db := n.stores.db
	failing := false // one line per run of failures, not one per entry
	for {
		applied := n.fsm.AppliedSignal() // before the entries: none slips between
		notice, delivered := n.relay.lastDelivered()
		index, term := n.fsm.AppliedEntry()
		if notice.Index > index {
			index, term = notice.Index, notice.EntryTerm
		}
		if term != 0 && index > db.CommitIndex() {
			_, err := db.SaveCommit(index, term)
			switch {
			case err != nil && !failing:
				n.log.Error("cannot store the commit index; a restart applies the entries past the stored one once a leader exists, and acknowledgements wait",
					"index", index, "err", err)
			case err == nil && failing:
				n.log.Info("the commit index is stored again", "index", index)
			}
			failing = err != nil
		}
		select {
		case <-n.stop:
			return
		case <-applied:
		case <-delivered:
		}
	}
}
