package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/leader"
	"github.com/meshgw/meshgw/mesh"
)

// Defaults of FailoverConfig.
const (
	// DefaultReconcileInterval is --reconcile-interval: the period of the full pass that backs
	// up the membership signals (the same default as the voter reconciler's).
	DefaultReconcileInterval = 30 * time.Second
	// DefaultMaxMovesPerEntry bounds one Reassign entry, so that a raft entry stays small and
	// the FSM's change log (4096 ids) can name every id it moved.
	DefaultMaxMovesPerEntry = 2048
	// maxPassesPerWake bounds the passes run back to back after one wake.
	maxPassesPerWake = 64
)

// Membership is the mesh's view of the peers, as failover reads it. Package server adapts the
// mesh's members to it.
type Membership interface {
	// Peers returns every peer the mesh lists, this node included, foreign peers left out.
	Peers() []Peer
	// Watch returns a channel that receives after membership changes and a function that stops
	// the watch. The sender never blocks on it (signals coalesce).
	Watch() (<-chan struct{}, func())
}

// Store is what failover needs of the raft node; *consensus.Node implements it.
type Store interface {
	// WorkersShared returns every record; failover only reads them.
	WorkersShared() []fsm.Record
	// Draining returns the peers marked draining: they are given no worker.
	Draining() []fsm.DrainingPeer
	// Apply proposes a command on the leader and returns its result.
	Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error)
}

// FailoverConfig configures a FailoverReconciler. The zero value of every optional field is its
// default.
type FailoverConfig struct {
	// Store is the raft node failover reads and writes through. Required.
	Store Store
	// Membership is the mesh's view of the peers. Required.
	Membership Membership
	// Grace is --owner-failover-grace. Zero means DefaultFailoverGrace.
	Grace time.Duration
	// ReconcileInterval is --reconcile-interval. Zero means DefaultReconcileInterval.
	ReconcileInterval time.Duration
	// MaxMovesPerEntry bounds the moves of one Reassign entry. Zero means
	// DefaultMaxMovesPerEntry.
	MaxMovesPerEntry int
	// Registerer receives meshgw_ownership_failovers_total and
	// meshgw_ownership_failover_workers_total. Nil means no metrics.
	Registerer prometheus.Registerer
	// Metrics counts the moved workers in meshgw_ownership_handoffs_total{reason="failover"}.
	// Nil means not counted there.
	Metrics *Metrics
	// Logger receives one line per failover. Nil means slog.Default().
	Logger *slog.Logger
}

// FailoverReconciler is the leader's duty of failing over the workers of gone owners
// (DESIGN.md section 5, Failover), with PlanFailover. It lives here rather than in consensus
// because it decides ownership, which consensus only stores; it reaches raft through Store.
// It is a leader.Duty, run by the node's Config.LeaderLoop:
//
//	var duties leader.Loop
//	cfg.LeaderLoop = duties.Run
//	node, err := consensus.Start(cfg)
//	f, err := ownership.NewFailoverReconciler(ownership.FailoverConfig{Store: node, Membership: m})
//	duties.Set(f)
type FailoverReconciler struct {
	cfg   FailoverConfig
	log   *slog.Logger
	store Store

	failovers, moved prometheus.Counter // nil without a Registerer

	passes atomic.Uint64 // passes finished, for tests
}

// NewFailoverReconciler returns the reconciler of cfg.Store's workers. It fails without a Store
// or a Membership, or when the metrics cannot be registered.
func NewFailoverReconciler(cfg FailoverConfig) (*FailoverReconciler, error) {
	if cfg.Store == nil {
		return nil, errors.New("ownership: the failover reconciler needs a Store")
	}
	if cfg.Membership == nil {
		return nil, errors.New("ownership: the failover reconciler needs a Membership")
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultFailoverGrace
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = DefaultReconcileInterval
	}
	if cfg.MaxMovesPerEntry <= 0 {
		cfg.MaxMovesPerEntry = DefaultMaxMovesPerEntry
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &FailoverReconciler{cfg: cfg, log: cfg.Logger.With("component", "failover"), store: cfg.Store}
	if reg := cfg.Registerer; reg != nil {
		r.failovers = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meshgw_ownership_failovers_total",
			Help: "Failovers this node applied as raft leader: one per gone owner per reassign entry.",
		})
		r.moved = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meshgw_ownership_failover_workers_total",
			Help: "Workers this node moved off gone owners as raft leader.",
		})
		if err := reg.Register(r.failovers); err != nil {
			return nil, fmt.Errorf("ownership: register metrics: %w", err)
		}
		if err := reg.Register(r.moved); err != nil {
			reg.Unregister(r.failovers)
			return nil, fmt.Errorf("ownership: register metrics: %w", err)
		}
	}
	return r, nil
}

// Term implements leader.Duty: fail over at the start, on each membership signal, every
// ReconcileInterval, and when the grace of a gone owner runs out. Owners the mesh does not list
// are timed from when this term first missed them, so a new leader gives them a full grace.
func (r *FailoverReconciler) Term() leader.Term {
	missing := make(map[string]time.Time)
	return leader.Term{
		Watch:    r.cfg.Membership.Watch,
		Interval: r.cfg.ReconcileInterval,
		Pass: func(ctx context.Context, _ leader.Wake) time.Time {
			if next, ok := r.reconcile(ctx, missing); ok {
				return next
			}
			return time.Time{}
		},
	}
}

// reconcile runs passes back to back while they move something, at most maxPassesPerWake, and
// returns the next grace deadline.
func (r *FailoverReconciler) reconcile(ctx context.Context, missing map[string]time.Time) (next time.Time, ok bool) {
	for range maxPassesPerWake {
		if ctx.Err() != nil {
			return time.Time{}, false
		}
		moved, n, nok, err := r.pass(ctx, missing)
		next, ok = n, nok
		if moved == 0 || err != nil {
			return next, ok
		}
	}
	return next, ok
}

// pass plans on the current records and membership and applies one Reassign entry of at most
// MaxMovesPerEntry moves. It returns how many records moved and the next grace deadline.
func (r *FailoverReconciler) pass(ctx context.Context, missing map[string]time.Time) (moved int, next time.Time, ok bool, err error) {
	defer r.passes.Add(1)
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("panic in a failover pass", "panic", p, "stack", string(debug.Stack()))
			err = errors.New("ownership: failover pass panicked")
		}
	}()
	now := time.Now()
	workers := workersOf(r.store.WorkersShared())
	peers := withUnknown(WithDraining(r.cfg.Membership.Peers(), r.store.Draining()), workers, missing, now)
	next, ok = NextFailover(workers, peers, now, r.cfg.Grace)
	moves := PlanFailover(workers, peers, now, r.cfg.Grace)
	if len(moves) == 0 {
		// A draining peer's workers that the drain did not move (a registration that came
		// after it, or a drain whose later entries failed) move here, as drain.
		if moves, _ = PlanHandoff(workers, peers); len(moves) > 0 {
			return r.moveDraining(ctx, moves), next, ok, nil
		}
		return 0, next, ok, nil
	}
	moves = moves[:min(len(moves), r.cfg.MaxMovesPerEntry)]
	items := make([]fsm.ReassignItem, len(moves))
	for i, m := range moves {
		items[i] = fsm.ReassignItem{ID: m.ID, From: fsm.Fence{Owner: m.From, Epoch: m.Epoch}, To: m.To}
	}
	res, err := r.store.Apply(ctx, fsm.Reassign{Items: items})
	if err != nil {
		r.log.Warn("failing over workers did not apply; the next pass plans again", "workers", len(items), "err", err)
		return 0, next, ok, err
	}
	return r.report(moves, peers, res.Reassign), next, ok, nil
}

// moveDraining applies one Reassign entry of a draining peer's workers and returns how many moved.
func (r *FailoverReconciler) moveDraining(ctx context.Context, moves []Move) int {
	moves = moves[:min(len(moves), r.cfg.MaxMovesPerEntry)]
	items := make([]fsm.ReassignItem, len(moves))
	for i, m := range moves {
		items[i] = fsm.ReassignItem{ID: m.ID, From: fsm.Fence{Owner: m.From, Epoch: m.Epoch}, To: m.To}
	}
	res, err := r.store.Apply(ctx, fsm.Reassign{Items: items})
	if err != nil || res.Reassign == nil {
		r.log.Warn("handing off a draining peer's workers did not apply; the next pass plans again", "workers", len(items), "err", err)
		return 0
	}
	n := len(res.Reassign.Moved)
	r.log.Info("handed off draining peers' workers", "workers", n, "first_owner", moves[0].From)
	r.cfg.Metrics.countMoves(ReasonDrain, n)
	return n
}

// report logs one line per failed-over owner and counts the metrics; it returns how many
// records moved.
func (r *FailoverReconciler) report(moves []Move, peers []Peer, res *fsm.ReassignResult) int {
	if res == nil {
		return 0
	}
	status := make(map[string]mesh.Status, len(peers))
	for _, p := range peers {
		status[p.ID] = p.Status
	}
	movedIDs := make(map[string]bool, len(res.Moved))
	for _, id := range res.Moved {
		movedIDs[string(id)] = true
	}
	// owner -> new owner -> count, over the moves that applied.
	tally := make(map[string]map[string]int)
	for _, m := range moves {
		if !movedIDs[string(m.ID)] {
			continue
		}
		if tally[m.From] == nil {
			tally[m.From] = make(map[string]int)
		}
		tally[m.From][m.To]++
	}
	owners := make([]string, 0, len(tally))
	for o := range tally {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	for _, o := range owners {
		n, to := 0, make([]string, 0, len(tally[o]))
		for p, c := range tally[o] {
			n += c
			to = append(to, fmt.Sprintf("%s:%d", p, c))
		}
		slices.Sort(to)
		r.log.Info("failed over a gone owner's workers", "owner", o, "owner_status", status[o].String(),
			"workers", n, "to", strings.Join(to, ","))
		if r.failovers != nil {
			r.failovers.Inc()
			r.moved.Add(float64(n))
		}
		r.cfg.Metrics.countMoves(ReasonFailover, n)
	}
	if len(res.Skipped) > 0 {
		r.log.Info("some failover moves were fenced off; the next pass plans again",
			"skipped", len(res.Skipped), "first", string(res.Skipped[0].ID), "reason", res.Skipped[0].Reason)
	}
	return len(res.Moved)
}

// workersOf reads the records as failover needs them.
func workersOf(recs []fsm.Record) []Worker {
	out := make([]Worker, len(recs))
	for i, rec := range recs {
		out[i] = Worker{
			ID:        rec.ID,
			Owner:     rec.Owner,
			Epoch:     rec.Epoch,
			Region:    rec.Spec.Region,
			HostLocal: rec.Spec.HostLocal(),
		}
	}
	return out
}

// withUnknown adds to peers the owners of workers that the mesh does not list, as
// mesh.StatusUnknown since the first time a pass missed them (noted in missing), and forgets the
// owners that the mesh lists again or that own nothing any more.
func withUnknown(peers []Peer, workers []Worker, missing map[string]time.Time, now time.Time) []Peer {
	listed := make(map[string]bool, len(peers))
	for _, p := range peers {
		listed[p.ID] = true
	}
	out := slices.Clip(peers)
	added := make(map[string]bool)
	for _, w := range workers {
		if listed[w.Owner] || added[w.Owner] {
			continue
		}
		added[w.Owner] = true
		since, ok := missing[w.Owner]
		if !ok {
			since, missing[w.Owner] = now, now
		}
		out = append(out, Peer{ID: w.Owner, Status: mesh.StatusUnknown, Since: since})
	}
	for id := range missing {
		if !added[id] {
			delete(missing, id)
		}
	}
	return out
}
