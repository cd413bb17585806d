package forward

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
)

// Re-sending a write whose attempt ended without the leader's answer (see consensus/doc.go,
// "Unknown outcomes", and docs/choices.md).
//
// An attempt whose entry may have reached a leader's log and that ended without an answer (the
// leader lost leadership, its connection broke, or it was paused and the forwarder gave up on
// it) is re-sent, up to MaxResends times, once this node knows a leader: a different one at
// once, the same one after AttemptTimeout. Every command may be re-sent, because a second copy
// never changes more than the first did:
//
//   - register, set_flags without a revision, replace_spec without a revision (PUT), transfer
//     without an epoch and drain are idempotent: a second copy is Unchanged (a disable with the
//     same reason and author changes nothing, whatever its time; a drain keeps the first one's
//     start); a handoff's second copy skips each move it made as "already owned by";
//   - set_flags and replace_spec with a revision (PATCH), transfer with an epoch and remove
//     (fenced or not) are compare-and-sets: a second copy is rejected (a conflict, or not
//     found) when the first applied.
//
// So the re-send's answer is the write's answer, except a conflict or not-found rejection: the
// first copy may be what caused it, and the write then answers consensus.ErrOutcomeUnknown,
// wrapping the rejection. An invalid rejection depends on the entry alone, and stands. A
// re-send that applied without a rejection is the write's answer: a first copy that committed
// before it shows in that answer, and one left in a deposed leader's log can no longer commit
// (an older term's entry commits only ahead of the newer leader's entries).

// unanswered is the error of an attempt that ended without the leader's answer after its entry
// may have reached the leader's log. It wraps consensus.ErrOutcomeUnknown; forward re-sends the
// write and never returns this type.
type unanswered struct {
	leader string // the node id asked
	err    error  // wraps consensus.ErrOutcomeUnknown
}

func (u *unanswered) Error() string { return u.err.Error() }
func (u *unanswered) Unwrap() error { return u.err }

// settle is the write's answer when its last attempt came to res and err and an earlier attempt
// u (nil: none) may be in a leader's log.
func (u *unanswered) settle(res fsm.Result, err error) (fsm.Result, error) {
	var last *unanswered
	if errors.As(err, &last) {
		err = last.err
	}
	if u == nil || err == nil {
		return res, err
	}
	var invalid *fsm.InvalidError
	switch {
	case res.Index != 0 && err == res.Err && errors.As(err, &invalid):
		return res, err // the entry itself is refused: the first copy was refused the same way
	case res.Index != 0 && err == res.Err:
		return fsm.Result{}, fmt.Errorf("%w; re-sent, it was rejected at index %d, which the first copy may have caused: %w",
			u.err, res.Index, err)
	case errors.Is(err, consensus.ErrOutcomeUnknown):
		return fsm.Result{}, err
	}
	return fsm.Result{}, fmt.Errorf("%w; re-sending it wrote nothing: %v", u.err, err)
}

// leaderID returns the leader this node knows (see consensus.Node.Leader).
func (f *Forwarder) leaderID() (id string, ok bool) { return f.node.Leader() }

// waitMoved waits, after an attempt to asked ended without its answer, until this node knows a
// leader other than asked, or any leader once AttemptTimeout has passed (asked may have kept
// leadership and only lost a connection). Only ctx bounds it: the write's outcome is unknown
// until a leader answers.
func (f *Forwarder) waitMoved(ctx context.Context, asked string) error {
	patient := time.Now().Add(f.o.AttemptTimeout)
	tick := time.NewTicker(f.o.LeaderPoll)
	defer tick.Stop()
	for {
		if id, ok := f.leaderID(); ok && (id != asked || !time.Now().Before(patient)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.done:
			return consensus.ErrShutdown
		case <-tick.C:
		}
	}
}
