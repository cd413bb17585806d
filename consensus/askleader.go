package consensus

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Leadership is the leader a node knows; *Node implements it.
type Leadership interface {
	// Leader returns the leader this node knows, itself when it leads; ok is false when it
	// knows none, and a shut-down node knows "" (Node.Leader).
	Leader() (id string, ok bool)
}

// UntilLeaderMoves runs call, a request to the leader asked, and waits for its answer. After
// patience without one it looks at n's leadership every poll, and gives the call up
// (cancelling its context) as soon as n knows a leader other than asked: a paused or cut-off
// leader keeps its connection open and never answers. movedTo is then that leader (or "" with
// call's result, when call answered as it was given up). Anything asked of a leader over gRPC
// can use it (a forwarded write, a read index); the caller decides whether asking the new
// leader again is safe. A panic in call is logged on log, with its stack, and answered as an
// error.
func UntilLeaderMoves[T any](ctx context.Context, n Leadership, log *slog.Logger, asked string, patience, poll time.Duration,
	call func(context.Context) (T, error)) (res T, movedTo string, err error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type reply struct {
		res T
		err error
	}
	done := make(chan reply, 1)
	go func() {
		r := reply{err: errors.New("the call to the leader panicked")}
		defer func() { done <- r }()
		defer recoverLog(log, "call to the leader")
		r.res, r.err = call(cctx)
	}()
	wait := time.NewTimer(patience)
	defer wait.Stop()
	var (
		watch *time.Ticker
		tick  <-chan time.Time // nil until patience runs out
	)
	defer func() {
		if watch != nil {
			watch.Stop()
		}
	}()
	for {
		select {
		case r := <-done:
			return r.res, "", r.err
		case <-wait.C:
			watch = time.NewTicker(poll)
			tick = watch.C
		case <-tick:
			now, ok := n.Leader()
			if !ok || now == asked {
				continue
			}
			cancel()
			if r := <-done; r.err == nil {
				return r.res, "", nil // answered as it was given up
			}
			if now == "" {
				now = "no one (this node is shut down)"
			}
			var zero T
			return zero, now, nil
		}
	}
}
