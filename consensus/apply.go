package consensus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fsm"
)

// Apply proposes cmd and waits until this node has applied it, or ctx ends (without a deadline,
// Config.ApplyTimeout bounds it). It must run on the leader.
//
// On success the Result is the same on every node, and err is the business error of a Rejected
// command (*fsm.NotFoundError, *fsm.ConflictError, *fsm.InvalidError) or nil. Otherwise err
// says what happened to the write:
//
//   - *NotLeaderError, ErrNoLeader, ErrTimeout, ErrShutdown, ctx.Err(), *fsm.InvalidError
//     (the command does not encode): nothing was written;
//   - ErrOutcomeUnknown (wrapping the cause): the entry may or may not commit.
func (n *Node) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	data, err := fsm.Encode(cmd)
	if err != nil {
		return fsm.Result{}, err
	}
	return n.ApplyEntry(ctx, cmd.Type(), data, n.ID())
}

// ApplyEntry is Apply for an entry already encoded (fsm.Encode) of type typ, proposed on behalf
// of node from: this node, or the follower that forwarded it, which the entry names
// (fsm.FSM.AppliedFor). Forwarding hands the leader entries in this form.
func (n *Node) ApplyEntry(ctx context.Context, typ fsm.CommandType, data []byte, from string) (fsm.Result, error) {
	if n.closed.Load() {
		return fsm.Result{}, ErrShutdown
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.ApplyTimeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return fsm.Result{}, err
	}
	if n.raft.State() != raft.Leader {
		return fsm.Result{}, n.notLeader()
	}
	start := time.Now()
	deadline, _ := ctx.Deadline()
	enqueue := time.Until(deadline)
	if enqueue <= 0 { // raft reads 0 as "wait forever"
		return fsm.Result{}, ErrTimeout
	}
	f := n.raft.ApplyLog(raft.Log{Data: data, Extensions: []byte(from)}, enqueue)
	if err := n.wait(ctx, f); err != nil {
		return fsm.Result{}, n.applyError(err)
	}
	res, ok := f.Response().(fsm.Result)
	if !ok {
		return fsm.Result{}, fmt.Errorf("%w: the FSM returned %T", ErrOutcomeUnknown, f.Response())
	}
	n.met.observeApply(typ.String(), time.Since(start))
	return res, res.Err
}

// wait waits for f or ctx. raft's Apply timeout bounds only the enqueueing, so the wait for the
// commit is bounded here. A future that resolves together with ctx wins.
//
// raft resolves almost every future by the time it shuts down, but not all: v1.8.0 hands
// committed entries with their futures to its FSM goroutine through a buffered channel, and
// that goroutine may exit on shutdown with entries still queued, whose futures then never
// resolve (hashicorp/raft issue 498, open). So nothing may wait on a future without a ctx that
// ends; the goroutine below then stays parked on such a future for the rest of the process
// (helpers_test.go tells goleak).
func (n *Node) wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() {
		defer n.recoverLog("apply wait")
		done <- f.Error()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
		}
	}
}

// applyError maps raft's errors to the node's, by what they mean for the write.
func (n *Node) applyError(err error) error {
	switch {
	case errors.Is(err, ErrOutcomeUnknown):
		return err
	case errors.Is(err, raft.ErrNotLeader):
		return n.notLeader() // refused before it was appended
	case errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return ErrNoLeader // refused before it was appended
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrTimeout
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, ErrShutdown)
	}
	// raft.ErrLeadershipLost and anything else after the entry was handed over.
	return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
}

// notLeader names the leader this node knows of, or says there is none.
func (n *Node) notLeader() error {
	addr, id := n.raft.LeaderWithID()
	if id == "" || id == raft.ServerID(n.cfg.NodeID) {
		return ErrNoLeader
	}
	return &NotLeaderError{Leader: string(id), LeaderAddress: string(addr)}
}
