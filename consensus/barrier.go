package consensus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
)

// Bounds of a read barrier.
const (
	// readIndexHops bounds the leaders one barrier asks in a row, following NOT_LEADER.
	readIndexHops = 3
	// readIndexLeaderWait bounds the wait for a leader to ask.
	readIndexLeaderWait = DefaultNoLeaderWait
	// readyTimeout bounds the Barrier a new leader commits before its first read index.
	readyTimeout = 2 * time.Second
	// appliedPoll is how often a barrier looks at the applied index again without a signal (an
	// entry that changes nothing applies without one).
	appliedPoll = time.Millisecond
)

// leaderReadIndex is the read index of this node, which must lead: once it committed an entry
// of its term (a Barrier, at most once a term) its FSM holds every entry of earlier terms; and
// once a quorum confirmed its leadership (VerifyLeader), no other leader can have acknowledged
// a write it does not hold. A write is acknowledged only after the leader applied it, so the
// FSM's applied index then covers every write acknowledged before the call.
func (a *FleetAck) leaderReadIndex(ctx context.Context) (uint64, error) {
	n := a.node
	if n.closed.Load() {
		return 0, ErrShutdown
	}
	if !n.IsLeader() {
		return 0, n.notLeader()
	}
	term := n.raft.CurrentTerm()
	if a.readyTerm.Load() != term {
		timeout := readyTimeout
		if d, ok := ctx.Deadline(); ok {
			timeout = min(timeout, time.Until(d))
		}
		if timeout <= 0 {
			return 0, ErrTimeout
		}
		if err := n.raft.Barrier(timeout).Error(); err != nil {
			return 0, fmt.Errorf("%w: the leader's barrier failed: %v", ErrNoLeader, err)
		}
		a.readyTerm.Store(term)
	} else if err := n.raft.VerifyLeader().Error(); err != nil {
		return 0, fmt.Errorf("%w: leadership not confirmed: %v", ErrNoLeader, err)
	}
	return n.AppliedIndex(), nil
}

// Barrier is a read barrier: it returns once this node's FSM has applied every write
// acknowledged before the call, by asking the leader's read index (itself, when it leads) and
// waiting until the FSM applied it. A state read after it is as current as the leader's was.
// Its errors are ErrNoLeader (no leader could be asked within a bound), ErrShutdown, ErrTimeout
// and ctx's; nothing is ever written.
func (a *FleetAck) Barrier(ctx context.Context) error {
	idx, err := a.readIndex(ctx)
	if err != nil {
		return err
	}
	return a.waitFSM(ctx, idx)
}

// readIndex asks the leader for its read index, following NOT_LEADER a bounded number of times
// and waiting a bounded time for a leader to be known.
func (a *FleetAck) readIndex(ctx context.Context) (uint64, error) {
	n := a.node
	waitUntil := time.Now().Add(readIndexLeaderWait)
	for hop := 0; hop < readIndexHops; {
		if n.closed.Load() {
			return 0, ErrShutdown
		}
		if n.IsLeader() {
			return a.leaderReadIndex(ctx)
		}
		_, id := n.raft.LeaderWithID()
		if id == "" {
			if time.Now().After(waitUntil) {
				return 0, ErrNoLeader
			}
			if !sleepCtx(ctx, DefaultLeaderPoll) {
				return 0, ctx.Err()
			}
			continue
		}
		hop++
		idx, next, err := a.askReadIndex(ctx, string(id))
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
func (a *FleetAck) askReadIndex(ctx context.Context, leader string) (idx uint64, next string, err error) {
	cc, err := a.conn(leader)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %v", ErrNoLeader, err)
	}
	// A paused or cut-off leader keeps the connection open and never answers: once this node
	// knows another leader, ask that one (asking again is always safe for a read).
	resp, movedTo, err := untilLeaderMoves(ctx, a.node, leader, DefaultAttemptTimeout, DefaultLeaderPoll,
		func(cctx context.Context) (*consensusv1.ReadIndexResponse, error) {
			return consensusv1.NewFleetAckClient(cc).ReadIndex(cctx, &consensusv1.ReadIndexRequest{From: a.node.ID()})
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

// waitFSM waits until the FSM applied index, or ctx ends.
func (a *FleetAck) waitFSM(ctx context.Context, index uint64) error {
	if a.node.AppliedIndex() >= index {
		return nil
	}
	signals, stop := a.node.Watch()
	defer stop()
	tick := time.NewTicker(appliedPoll)
	defer tick.Stop()
	for a.node.AppliedIndex() < index {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: this node applied %d of the leader's %d", ctx.Err(), a.node.AppliedIndex(), index)
		case <-a.stop:
			return ErrShutdown
		case <-signals:
		case <-tick.C:
		}
	}
	return nil
}
