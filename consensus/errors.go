package consensus

import (
	"errors"
	"fmt"
)

// Errors of Apply besides the business errors of package fsm (fsm.ErrNotFound, fsm.ErrConflict,
// fsm.ErrInvalid), which it returns as they are. Whether the write happened is part of each
// error's meaning, because the admin API must tell the operator.
var (
	// ErrNoLeader: the cluster has no leader right now (an election, or no quorum). Nothing was
	// written. Admin writes answer 503 no_leader.
	ErrNoLeader = errors.New("no raft leader")

	// ErrOutcomeUnknown: the write reached the leader's log but the leader lost leadership, shut
	// down or ran out of time before the entry was known to commit. It may or may not be
	// applied; a reader finds out from the state. Retrying is safe for commands that are
	// idempotent (register, set flags) and for compare-and-set commands (the retry then fails
	// with a conflict if the first attempt won). A forward.Forwarder already retries once a newer
	// leader is known (doc.go, "Unknown outcomes"); when its re-send of a compare-and-set was
	// rejected, the error wraps that rejection too.
	ErrOutcomeUnknown = errors.New("raft write outcome unknown: it may or may not have been committed")

	// ErrTimeout: the write could not be handed to raft before the deadline. Nothing was written.
	ErrTimeout = errors.New("raft write timed out before it was queued")

	// ErrShutdown: the node is shut down. Alone it means nothing was written; wrapped with
	// ErrOutcomeUnknown it means the write was in flight.
	ErrShutdown = errors.New("raft node is shut down")
)

// NotLeaderError says this node is a follower and names the leader to forward to. Nothing was
// written. Follow it with errors.As.
type NotLeaderError struct {
	// Leader is the leader's node id.
	Leader string
	// LeaderAddress is the leader's raft address.
	LeaderAddress string
}

func (e *NotLeaderError) Error() string {
	return "not the raft leader; the leader is " + e.Leader + " at " + e.LeaderAddress
}

// LeaderUnreachableError says this node knows a leader but could not hand it the write: no RPC
// address is known for it, it could not be dialled, or it answered that it is shutting down.
// Nothing was written. errors.Is(err, ErrNoLeader) is true: for a writer there is no leader.
type LeaderUnreachableError struct {
	// Leader is the leader's node id; Address its RPC address, "" when none is known.
	Leader  string
	Address string
	Err     error
}

func (e *LeaderUnreachableError) Error() string {
	at := ""
	if e.Address != "" {
		at = " at " + e.Address
	}
	return fmt.Sprintf("raft leader %s is unreachable%s: %v; nothing was written", e.Leader, at, e.Err)
}

// Is makes errors.Is(err, ErrNoLeader) true.
func (e *LeaderUnreachableError) Is(target error) bool { return target == ErrNoLeader }

// Unwrap returns the cause.
func (e *LeaderUnreachableError) Unwrap() error { return e.Err }
