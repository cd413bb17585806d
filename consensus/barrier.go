package consensus

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/ctxtime"
)

// Bounds of a read barrier.
const (
	// readIndexHops bounds the leaders one barrier asks in a row, following NOT_LEADER.
	readIndexHops = 3
	// readIndexLeaderWait bounds the wait for a leader to ask (as a forwarded write's).
	readIndexLeaderWait = 2 * time.Second
	// readIndexLeaderPoll is how often a barrier waiting for a leader looks again.
	readIndexLeaderPoll = 50 * time.Millisecond
	// readIndexPatience is how long a barrier waits for a leader's answer before it watches
	// leadership and asks the next leader instead (as a forwarded write's AttemptTimeout).
	readIndexPatience = time.Second
	// readyTimeout bounds the Barrier a new leader commits before its first read index.
	readyTimeout = 2 * time.Second
	// appliedPoll is how often a barrier looks at the applied index again without a signal (an
	// entry that changes nothing applies without one).
	appliedPoll = time.Millisecond
)

// ReadIndexPeers reaches other nodes' FleetAck service (api/consensus/v1), which answers
// ReadIndex; consensus/fleetack serves it and implements this over its connections to peers.
type ReadIndexPeers interface {
	// FleetAckClient returns a client of node id's FleetAck service.
	FleetAckClient(id string) (consensusv1.FleetAckClient, error)
}

// ReadIndex is the read index of this node, which must lead (the FleetAck service answers a
// peer's ReadIndex with it): once it committed an entry
// of its term (a Barrier, at most once a term) its FSM holds every entry of earlier terms; and
// once a quorum confirmed its leadership (VerifyLeader), no other leader can have acknowledged
// a write it does not hold. A write is acknowledged only after the leader applied it, so the
// FSM's applied index then covers every write acknowledged before the call.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	if n.closed.Load() {
		return 0, ErrShutdown
	}
	if !n.IsLeader() {
		return 0, n.notLeader()
	}
	term := n.raft.CurrentTerm()
	first := n.readyTerm.Load() != term
	var f raft.Future
	what := "leadership not confirmed"
	if first {
		timeout := readyTimeout
		if d, ok := ctx.Deadline(); ok {
			timeout = min(timeout, time.Until(d))
		}
		if timeout <= 0 {
			return 0, ErrTimeout
		}
		f, what = n.barrier(timeout), "the leader's barrier failed"
	} else {
		f = n.raft.VerifyLeader()
	}
	if err := n.wait(ctx, f); err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("%w: %s: %v", ErrNoLeader, what, err)
	}
	if first {
		n.readyTerm.Store(term)
	}
	return n.AppliedIndex(), nil
}

// ReadBarrier is a read barrier: it returns once this node's FSM has applied every write
// acknowledged before the call, by asking the leader's read index (itself, when it leads) over
// peers and waiting until the FSM applied it. A state read after it is as current as the
// leader's was. Its errors are ErrNoLeader (no leader could be asked within a bound),
// ErrShutdown, ErrTimeout and ctx's; nothing is ever written.
func (n *Node) ReadBarrier(ctx context.Context, peers ReadIndexPeers) error {
	idx, err := n.readIndex(ctx, peers)
	if err != nil {
		return err
	}
	return n.waitFSM(ctx, idx)
}

// readIndex asks the leader for its read index, following NOT_LEADER a bounded number of times
// and waiting a bounded time for a leader to be known.
func (n *Node) readIndex(ctx context.Context, peers ReadIndexPeers) (uint64, error) {
	waitUntil := time.Now().Add(readIndexLeaderWait)
	for hop := 0; hop < readIndexHops; {
		if n.closed.Load() {
			return 0, ErrShutdown
		}
		if n.IsLeader() {
			return n.ReadIndex(ctx)
		}
		_, id := n.raft.LeaderWithID()
		if id == "" {
			if time.Now().After(waitUntil) {
				return 0, ErrNoLeader
			}
			if ctxtime.Sleep(ctx, readIndexLeaderPoll) != nil {
				return 0, ctx.Err()
			}
			continue
		}
		hop++
		idx, next, err := n.askReadIndex(ctx, peers, string(id))
		if err == nil {
			return idx, nil
		}
		if next == "" {
			return 0, err
		}
		// next leads now (this node, possibly): the loop asks it, or reads its own index.
	}
	return 0, fmt.Errorf("%w: the read index was not answered after %d leaders", ErrNoLeader, readIndexHops)
}

// askReadIndex asks one node, believed to lead, for its read index; next is the leader it
// names when it does not lead.
func (n *Node) askReadIndex(ctx context.Context, peers ReadIndexPeers, leader string) (idx uint64, next string, err error) {
	client, err := peers.FleetAckClient(leader)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %v", ErrNoLeader, err)
	}
	// A paused or cut-off leader keeps the connection open and never answers: once this node
	// knows another leader, ask that one (asking again is always safe for a read).
	resp, movedTo, err := UntilLeaderMoves(ctx, n, n.log, leader, readIndexPatience, readIndexLeaderPoll,
		func(cctx context.Context) (*consensusv1.ReadIndexResponse, error) {
			return client.ReadIndex(cctx, &consensusv1.ReadIndexRequest{From: n.ID()})
		})
	if movedTo != "" {
		return 0, movedTo, &NotLeaderError{Leader: movedTo}
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return 0, "", cerr
		}
		return 0, "", &LeaderUnreachableError{Leader: leader, Err: err}
	}
	switch resp.Status {
	case consensusv1.ReadIndexStatus_READ_INDEX_STATUS_OK:
		return resp.Index, "", nil
	case consensusv1.ReadIndexStatus_READ_INDEX_STATUS_NOT_LEADER:
		return 0, resp.LeaderId, &NotLeaderError{Leader: resp.LeaderId}
	}
	return 0, "", fmt.Errorf("%w: %s could not confirm its leadership", ErrNoLeader, leader)
}

// waitFSM waits until the FSM applied index, or ctx ends, or the node shuts down.
func (n *Node) waitFSM(ctx context.Context, index uint64) error {
	if n.AppliedIndex() >= index {
		return nil
	}
	signals, stop := n.Watch()
	defer stop()
	tick := time.NewTicker(appliedPoll)
	defer tick.Stop()
	for n.AppliedIndex() < index {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: this node applied %d of the leader's %d", ctx.Err(), n.AppliedIndex(), index)
		case <-n.stop:
			return ErrShutdown
		case <-signals:
		case <-tick.C:
		}
	}
	return nil
}
