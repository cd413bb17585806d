package fleet

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

// Applier proposes a raft command and returns its result; *consensus.Node implements it.
type Applier interface {
	Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error)
}

// DefaultWriteTimeout bounds one write when the caller's context has no deadline.
const DefaultWriteTimeout = 10 * time.Second

// Writer writes worker records through raft for the admin API, the command line's workers and
// health's removals. The zero value of every optional field is a working default.
type Writer struct {
	// Node proposes the commands. Required.
	Node Applier
	// NodeID is this gateway's node id: the owner of what it registers, and the fence of its
	// removals. Required.
	NodeID string
	// Timeout bounds one write whose context has no deadline. Zero means DefaultWriteTimeout.
	Timeout time.Duration
	// Logger receives the registration and removal lines. Nil means slog.Default().
	Logger *slog.Logger
	// Now stamps registrations. Nil means time.Now.
	Now func() time.Time
	// Sleep waits between registration attempts, returning early with ctx's error. Nil means a
	// real timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Apply proposes cmd, bounded by Timeout when ctx has no deadline. Its errors are the node's
// (see consensus.Node.Apply): business errors from package fsm, or consensus errors saying
// whether the write happened.
func (w *Writer) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.timeout())
		defer cancel()
	}
	return w.Node.Apply(ctx, cmd)
}

// RemoveFenced removes the record of id only while owner still owns it at epoch: the
// compare-and-set that keeps a gateway that lost a worker from removing it.
func (w *Writer) RemoveFenced(ctx context.Context, id worker.ID, owner string, epoch uint64) (fsm.Result, error) {
	return w.Apply(ctx, fsm.Remove{ID: id, Fence: &fsm.Fence{Owner: owner, Epoch: epoch}})
}

// OnRemove is health's removal hook (gateway/owned.Options.OnRemove): it removes the record of
// id fenced by this node and epoch, in the background so that the caller's loop never waits on
// raft. A record already gone or owned elsewhere is logged and left alone.
func (w *Writer) OnRemove(id worker.ID, epoch uint64, reason string) {
	go func() {
		defer w.recoverLog("fenced removal")
		res, err := w.RemoveFenced(context.Background(), id, w.NodeID, epoch)
		log := w.logger()
		switch {
		case err == nil:
			log.Info("worker record removed", "record", res.Record, "reason", reason)
		case errors.Is(err, fsm.ErrNotFound):
			log.Debug("worker record already removed", "id", id, "reason", reason)
		case errors.Is(err, fsm.ErrConflict):
			log.Info("worker record not removed: this gateway no longer owns it at that epoch",
				"id", id, "epoch", epoch, "reason", reason, "err", err)
		default:
			log.Warn("removing a worker record failed", "id", id, "epoch", epoch, "reason", reason, "err", err)
		}
	}()
}

func (w *Writer) timeout() time.Duration {
	if w.Timeout > 0 {
		return w.Timeout
	}
	return DefaultWriteTimeout
}

func (w *Writer) logger() *slog.Logger {
	if w.Logger == nil {
		return slog.Default().With("component", "fleet")
	}
	return w.Logger.With("component", "fleet")
}

func (w *Writer) now() time.Time {
	if w.Now == nil {
		return time.Now()
	}
	return w.Now()
}

func (w *Writer) sleep(ctx context.Context, d time.Duration) error {
	if w.Sleep != nil {
		return w.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *Writer) recoverLog(what string) {
	if p := recover(); p != nil {
		w.logger().Error("panic in background goroutine", "goroutine", what, "panic", p, "stack", string(debug.Stack()))
	}
}

// Retryable reports whether a failed write may be tried again as it is: nothing was written
// (no leader yet, not queued in time) or the outcome is unknown and the command is idempotent
// or a compare-and-set. Business errors and a shut-down node are final.
func Retryable(err error) bool {
	var nl *consensus.NotLeaderError
	switch {
	case errors.Is(err, consensus.ErrOutcomeUnknown):
		return !errors.Is(err, consensus.ErrShutdown)
	case errors.Is(err, consensus.ErrShutdown):
		return false
	case errors.Is(err, consensus.ErrNoLeader), errors.Is(err, consensus.ErrTimeout), errors.As(err, &nl):
		return true
	case errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return false
}
