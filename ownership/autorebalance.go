package ownership

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
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
// the rebalance of meshctl rebalance, with the peers alive for less than Settle left out. Its
// Run is meant for the node's Config.LeaderLoop, like FailoverReconciler's.
type AutoRebalancer struct {
	cfg      AutoRebalanceConfig
	log      *slog.Logger
	attach   sync.Once
	attached chan struct{}
	op       *Operator // set once, before attached is closed
}

// NewAutoRebalancer returns a rebalancer that waits for Attach.
func NewAutoRebalancer(cfg AutoRebalanceConfig) (*AutoRebalancer, error) {
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
	return &AutoRebalancer{cfg: cfg, log: cfg.Logger.With("component", "rebalance"), attached: make(chan struct{})}, nil
}

// Attach gives the rebalancer the node it reads and writes through. Only the first call counts.
func (a *AutoRebalancer) Attach(s RebalanceStore) {
	a.attach.Do(func() {
		a.op = NewOperator(OperatorConfig{Records: s, Membership: a.cfg.Membership, Apply: s, Metrics: a.cfg.Metrics, Logger: a.cfg.Logger})
		close(a.attached)
	})
}

// Run rebalances until ctx ends: Settle after it starts or after the last membership signal,
// then every ReconcileInterval.
func (a *AutoRebalancer) Run(ctx context.Context) {
	select {
	case <-a.attached:
	case <-ctx.Done():
		return
	}
	signals, stop := a.cfg.Membership.Watch()
	defer stop()
	settled := time.NewTimer(a.cfg.Settle)
	defer settled.Stop()
	tick := time.NewTicker(a.cfg.ReconcileInterval)
	defer tick.Stop()
	quiet := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-signals:
			quiet = false
			settled.Reset(a.cfg.Settle)
			continue
		case <-settled.C:
			quiet = true
		case <-tick.C:
			if !quiet {
				continue
			}
		}
		a.pass(ctx)
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
