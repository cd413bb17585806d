package ownership

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/meshgw/meshgw/leader"
)

// DefaultRebalanceSettle is how long membership must stay quiet before --auto-rebalance runs,
// and how long a peer must have been alive to take part.
const DefaultRebalanceSettle = 10 * time.Second

// RebalanceStore is what the automatic rebalance reads and writes; *consensus.Node implements
// it (the leader applies its own entries).
type RebalanceStore interface {
	Records
	Applier
}

// AutoRebalanceConfig configures an AutoRebalancer. The zero value of every optional field is
// its default.
type AutoRebalanceConfig struct {
	// Store is the raft node the rebalance reads and writes through. Required.
	Store RebalanceStore
	// Membership is the mesh's view of the peers. Required.
	Membership Membership
	// Settle is how long membership must be quiet. Zero means DefaultRebalanceSettle.
	Settle time.Duration
	// ReconcileInterval is the period of the pass that catches what changed without a
	// membership signal (a failover that finished). Zero means DefaultReconcileInterval.
	ReconcileInterval time.Duration
	// Metrics counts the moves as rebalance. Nil means none.
	Metrics *Metrics
	// Logger receives one line per rebalance that moved something. Nil means slog.Default().
	Logger *slog.Logger
}

// AutoRebalancer is the leader's duty of --auto-rebalance: once membership has settled after a
// change (no signal for Settle), and at every ReconcileInterval while it stays settled, it runs
// the rebalance of meshctl rebalance, with the peers alive for less than Settle left out. It is
// a leader.Duty, like FailoverReconciler.
type AutoRebalancer struct {
	cfg AutoRebalanceConfig
	log *slog.Logger
	op  *Operator
}

// NewAutoRebalancer returns the rebalancer of cfg.Store's workers.
func NewAutoRebalancer(cfg AutoRebalanceConfig) (*AutoRebalancer, error) {
	if cfg.Store == nil {
		return nil, errors.New("ownership: the automatic rebalance needs a Store")
	}
	if cfg.Membership == nil {
		return nil, errors.New("ownership: the automatic rebalance needs a Membership")
	}
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultRebalanceSettle
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = DefaultReconcileInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	op := NewOperator(OperatorConfig{Records: cfg.Store, Membership: cfg.Membership, Apply: cfg.Store, Metrics: cfg.Metrics, Logger: cfg.Logger})
	return &AutoRebalancer{cfg: cfg, log: cfg.Logger.With("component", "rebalance"), op: op}, nil
}

// Term implements leader.Duty: rebalance Settle after the term starts or after the last
// membership signal, then every ReconcileInterval until the next signal.
func (a *AutoRebalancer) Term() leader.Term {
	quiet := false
	settleAt := time.Time{} // when membership counts as settled, while it is not yet
	return leader.Term{
		Watch:    a.cfg.Membership.Watch,
		Interval: a.cfg.ReconcileInterval,
		Pass: func(ctx context.Context, w leader.Wake) time.Time {
			switch w {
			case leader.Start, leader.Signal:
				quiet, settleAt = false, time.Now().Add(a.cfg.Settle)
				return settleAt
			case leader.Timer:
				quiet = true
			case leader.Tick:
				if !quiet {
					return settleAt
				}
			}
			a.pass(ctx)
			return time.Time{}
		},
	}
}

// pass runs one rebalance.
func (a *AutoRebalancer) pass(ctx context.Context) {
	defer func() {
		if p := recover(); p != nil {
			a.log.Error("panic in an automatic rebalance", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	out, err := a.op.rebalance(ctx, false, a.cfg.Settle)
	switch {
	case err != nil:
		a.log.Warn("the automatic rebalance did not apply; the next pass plans again", "err", err)
	case len(out.Moves) > 0:
		a.log.Info("rebalanced worker ownership", "planned", len(out.Moves), "moved", len(out.Moved), "skipped", len(out.Skipped))
	}
}
