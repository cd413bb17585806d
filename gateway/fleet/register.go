package fleet

import (
	"context"
	"errors"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

// Bounds of RegisterAll's retries: about two and a half minutes of waiting for a leader per
// worker before it gives up.
const (
	registerAttempts   = 30
	registerBackoff    = 200 * time.Millisecond
	registerMaxBackoff = 5 * time.Second
)

// RegisterOutcome is what registering one command-line worker came to.
type RegisterOutcome struct {
	ID worker.ID
	// Outcome is fsm.Created or fsm.Unchanged on success, fsm.Rejected when the id is
	// registered with another spec (kept as it is) or the write failed for good.
	Outcome fsm.Outcome
	Err     error
}

// RegisterAll registers each spec (normalized) through raft, owned by NodeID: the workers of
// --worker-urls and --worker-config. It is idempotent across restarts: an identical record is
// Unchanged, and a record that differs (an operator changed it through the admin API since) is
// a conflict that is logged and kept. A registration never touches a record's flags. Writes that
// found no leader are retried with a backoff, a bounded number of times, so RegisterAll is meant
// to run in the background while the data plane serves what raft has applied. It returns when
// every spec is settled or ctx ends.
func (w *Writer) RegisterAll(ctx context.Context, specs []worker.Spec) []RegisterOutcome {
	out := make([]RegisterOutcome, 0, len(specs))
	waiting := false
	for _, s := range specs {
		res, err := w.registerOne(ctx, s, &waiting)
		o := RegisterOutcome{ID: s.ID(), Outcome: res.Outcome, Err: err}
		w.logRegistration(ctx, s, res, err)
		out = append(out, o)
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

// registerOne registers s, retrying while nothing could be written.
func (w *Writer) registerOne(ctx context.Context, s worker.Spec, waiting *bool) (fsm.Result, error) {
	backoff := registerBackoff
	var err error
	for attempt := 1; ; attempt++ {
		var res fsm.Result
		res, err = w.Apply(ctx, fsm.Register{Spec: s, Owner: w.NodeID, At: w.now()})
		if err == nil || !Retryable(err) || attempt == registerAttempts || ctx.Err() != nil {
			return res, err
		}
		if !*waiting {
			*waiting = true
			w.logger().Info("waiting for raft to accept the command line's workers", "err", err)
		} else {
			w.logger().Debug("registration attempt failed; retrying", "id", s.ID(), "attempt", attempt, "err", err)
		}
		if w.sleep(ctx, backoff) != nil {
			return res, ctx.Err()
		}
		backoff = min(backoff*2, registerMaxBackoff)
	}
}

func (w *Writer) logRegistration(ctx context.Context, s worker.Spec, res fsm.Result, err error) {
	log := w.logger()
	id, url := s.ID(), s.URL // a normalized URL carries no credentials
	switch {
	case err == nil && res.Outcome == fsm.Created:
		log.Info("registered worker", "id", id, "url", url, "owner", w.NodeID)
	case err == nil:
		log.Info("worker already registered", "id", id, "url", url)
	case errors.Is(err, fsm.ErrConflict):
		log.Info("kept the registered worker: its record differs from the command line's (changed through the admin API since)",
			"id", id, "url", url)
	case ctx.Err() != nil:
		log.Info("stopped registering worker", "id", id, "url", url, "err", err)
	default:
		log.Warn("gave up registering worker", "id", id, "url", url, "err", err)
	}
}
