package fleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

// RegisterAll's pace: the backoff between attempts of one worker while nothing could be
// written (no leader yet), and how many registrations run at once.
const (
	registerBackoff     = 200 * time.Millisecond
	registerMaxBackoff  = 5 * time.Second
	registerConcurrency = 16
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
// a conflict that is logged and kept. A registration never touches a record's flags. Up to
// registerConcurrency registrations run at once (raft batches them into its appends), and a
// write that found no leader (a gateway that joins late, a fleet that lost its quorum) is
// retried with a backoff until it commits or ctx ends: the command line's workers are never
// given up on. It is meant to run in the background while the data plane serves what raft has
// applied, and returns when every spec is settled or ctx ends; outcomes are in specs' order.
func (w *Writer) RegisterAll(ctx context.Context, specs []worker.Spec) []RegisterOutcome {
	out := make([]RegisterOutcome, len(specs))
	var waiting atomic.Bool
	sem := make(chan struct{}, registerConcurrency)
	var wg sync.WaitGroup
	for i, s := range specs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			out = out[:i]
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			res, err := w.registerOne(ctx, s, &waiting)
			out[i] = RegisterOutcome{ID: s.ID(), Outcome: res.Outcome, Err: err}
			w.logRegistration(ctx, s, res, err)
		})
	}
	wg.Wait()
	if waiting.Load() && ctx.Err() == nil {
		w.logger().Info("raft accepted the command line's workers", "workers", len(specs))
	}
	return out
}

// registerOne registers s, retrying while nothing could be written, until ctx ends.
func (w *Writer) registerOne(ctx context.Context, s worker.Spec, waiting *atomic.Bool) (fsm.Result, error) {
	backoff := registerBackoff
	for attempt := 1; ; attempt++ {
		res, err := w.Apply(ctx, fsm.Register{Spec: s, Owner: w.NodeID, At: w.now()})
		if err == nil || !Retryable(err) || ctx.Err() != nil {
			return res, err
		}
		if !waiting.Swap(true) {
			w.logger().Info("waiting for raft to accept the command line's workers; retrying until it does", "err", err)
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
	case errors.Is(err, fsm.ErrConflict) && res.Record != nil && res.Record.Draining:
		log.Info("did not register the worker again: a DELETE is draining it, and its owner removes the record",
			"id", id, "url", url, "deadline", res.Record.DrainDeadline())
	case errors.Is(err, fsm.ErrConflict):
		log.Info("kept the registered worker: its record differs from the command line's (changed through the admin API since)",
			"id", id, "url", url)
	case ctx.Err() != nil:
		log.Info("stopped registering worker: the gateway is stopping", "id", id, "url", url, "err", err)
	default:
		log.Warn("cannot register worker", "id", id, "url", url, "err", err)
	}
}
