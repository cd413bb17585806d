package fleet

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/ctxtime"
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

	rm removals
}

// CutOff says, when Node can tell (forward.Forwarder.CutOff), that this gateway is cut off from
// the quorum: a write through it would fail, and a read barrier would wait for a leader it
// cannot reach. Nil otherwise.
func (w *Writer) CutOff() error {
	if c, ok := w.Node.(interface{ CutOff() error }); ok {
		return c.CutOff()
	}
	return nil
}

// removals are the fenced removals in flight (OnRemove), retried until they are settled; Close
// ends them.
type removals struct {
	once    sync.Once
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	pending map[worker.ID]bool
}

func (r *removals) init() *removals {
	r.once.Do(func() {
		r.ctx, r.cancel = context.WithCancel(context.Background())
		r.pending = make(map[worker.ID]bool)
	})
	return r
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
// raft. A removal that finds no leader is retried, backing off to 5 s, until it commits, the
// record is gone, this node no longer owns it at epoch (the fence fails), or Close. A removal
// of the same worker already in flight is not started twice.
func (w *Writer) OnRemove(id worker.ID, epoch uint64, reason string) {
	r := w.rm.init()
	r.mu.Lock()
	if r.pending[id] || r.ctx.Err() != nil {
		r.mu.Unlock()
		return
	}
	r.pending[id] = true
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.pending, id)
			r.mu.Unlock()
		}()
		defer w.recoverLog("fenced removal")
		w.removeUntilSettled(r.ctx, id, epoch, reason)
	}()
}

// removeUntilSettled runs one fenced removal to its end: committed, or refused for good.
func (w *Writer) removeUntilSettled(ctx context.Context, id worker.ID, epoch uint64, reason string) {
	log := w.logger()
	backoff := registerBackoff
	for attempt := 1; ; attempt++ {
		res, err := w.RemoveFenced(ctx, id, w.NodeID, epoch)
		switch {
		case err == nil:
			log.Info("worker record removed", "record", res.Record, "reason", reason, "attempts", attempt)
			return
		case errors.Is(err, fsm.ErrNotFound):
			log.Debug("worker record already removed", "id", id, "reason", reason)
			return
		case errors.Is(err, fsm.ErrConflict):
			log.Info("worker record not removed: this gateway no longer owns it at that epoch",
				"id", id, "epoch", epoch, "reason", reason, "err", err)
			return
		case ctx.Err() != nil:
			log.Warn("worker record not removed: the gateway is stopping; its health checks remove it again after the restart",
				"id", id, "epoch", epoch, "reason", reason)
			return
		case !Retryable(err):
			log.Warn("removing a worker record failed", "id", id, "epoch", epoch, "reason", reason, "err", err)
			return
		case attempt == 1:
			log.Warn("removing a worker record waits for raft; retrying until it commits", "id", id, "epoch", epoch,
				"reason", reason, "err", err)
		}
		if w.sleep(ctx, backoff) != nil {
			log.Warn("worker record not removed: the gateway is stopping; its health checks remove it again after the restart",
				"id", id, "epoch", epoch, "reason", reason)
			return
		}
		backoff = min(backoff*2, registerMaxBackoff)
	}
}

// Close ends the removals in flight and waits for them. Their records stay; the owner's health
// checks remove such a worker again after a restart.
func (w *Writer) Close() {
	r := w.rm.init()
	r.cancel()
	r.wg.Wait()
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
	return ctxtime.Sleep(ctx, d)
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
