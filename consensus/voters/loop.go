package consensus

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/leader"
)

// Defaults of VoterReconcilerConfig.
const (
	// DefaultReconcileInterval is --reconcile-interval: the period of the full pass that backs
	// up the membership events.
	DefaultReconcileInterval = 30 * time.Second
	// DefaultChangeTimeout bounds one configuration change, from hand-over to commit.
	DefaultChangeTimeout = 10 * time.Second
	// maxPassesPerWake bounds the passes run back to back after one event or tick: a plan holds
	// one voter change, so a pass that changed something is followed at once by another.
	maxPassesPerWake = 16
	// unreachableRecheck is how soon a pass runs again after one that found a non-voter the
	// leader's raft has not reached: no membership event comes when it answers (a gateway just
	// added, or started again at once), and the next full pass is ReconcileInterval away. The
	// node's contact signal (raftContact) wakes the duty as soon as it answers; this backs it up.
	unreachableRecheck = time.Second
)

// errChangeTimeout says a configuration change was handed to raft but not known to commit in
// time. The next pass reads the configuration again, whatever became of it.
var errChangeTimeout = errors.New("consensus: the membership change did not commit in time")

// Membership is the mesh's view of the peers, as the voter reconciler reads it. cmd/meshgw
// adapts the mesh's members to it.
type Membership interface {
	// Peers returns every peer the mesh knows, this node included, foreign peers left out.
	Peers() []Peer
	// Watch returns a channel that receives after membership changes and a function that stops
	// the watch. The sender must never block on it (a buffer of one, sent without waiting, so
	// signals coalesce): the reconciler reads Peers anew on each signal and on a timer, so a
	// dropped signal costs nothing.
	Watch() (<-chan struct{}, func())
}

// membershipChanger is what the reconciler needs of the raft node; *Node implements it.
type membershipChanger interface {
	ID() string
	configuration() (raft.Configuration, uint64, error)
	changeMembership(c Change, prevIndex uint64, timeout time.Duration) raft.IndexFuture
}

// VoterReconcilerConfig configures a VoterReconciler. The zero value of every optional field is
// its default.
type VoterReconcilerConfig struct {
	// Node is the raft node whose configuration the reconciler manages. Required.
	Node *Node
	// Membership is the mesh's view of the peers. Required.
	Membership Membership
	// Voters is --raft-voters. Zero (the default) chooses it by the fleet's size (AutoVoters).
	Voters int
	// DeadVoterGrace is --dead-voter-grace. Zero means DefaultDeadVoterGrace.
	DeadVoterGrace time.Duration
	// ReconcileInterval is --reconcile-interval. Zero means DefaultReconcileInterval.
	ReconcileInterval time.Duration
	// ChangeTimeout bounds each configuration change. Zero means DefaultChangeTimeout.
	ChangeTimeout time.Duration
	// Logger receives one line per change. Nil means slog.Default().
	Logger *slog.Logger
}

// VoterReconciler is the leader's duty of reconciling the mesh's membership into the raft
// configuration (DESIGN.md section 3, Voters) with PlanMembership: a pass when a term starts,
// on each membership signal and every ReconcileInterval. It is a leader.Duty, run by the
// node's Config.LeaderLoop:
//
//	var duties leader.Loop
//	cfg.LeaderLoop = duties.Run
//	node, err := consensus.Start(cfg)
//	r, err := consensus.NewVoterReconciler(consensus.VoterReconcilerConfig{Node: node, Membership: m})
//	duties.Set(r)
type VoterReconciler struct {
	cfg  VoterReconcilerConfig
	log  *slog.Logger
	node membershipChanger

	passes atomic.Uint64 // passes finished, for tests
	// sawUnreachable says the last pass found a non-voter its node's raft has not reached (the
	// duty then passes again after unreachableRecheck, or at the node's contact signal).
	sawUnreachable atomic.Bool
}

// NewVoterReconciler returns the reconciler of cfg.Node's configuration.
func NewVoterReconciler(cfg VoterReconcilerConfig) (*VoterReconciler, error) {
	if cfg.Node == nil {
		return nil, errors.New("consensus: the voter reconciler needs a Node")
	}
	return newVoterReconciler(cfg, cfg.Node)
}

// newVoterReconciler is NewVoterReconciler on any membershipChanger (a test's fake).
func newVoterReconciler(cfg VoterReconcilerConfig, node membershipChanger) (*VoterReconciler, error) {
	if cfg.Membership == nil {
		return nil, errors.New("consensus: the voter reconciler needs a Membership")
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = DefaultReconcileInterval
	}
	if cfg.ChangeTimeout <= 0 {
		cfg.ChangeTimeout = DefaultChangeTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &VoterReconciler{cfg: cfg, log: cfg.Logger.With("component", "voters"), node: node}, nil
}

// Term implements leader.Duty: reconcile at the start, on each membership signal, on the node's
// signal that its raft reached a peer, every ReconcileInterval, and unreachableRecheck after a
// pass that found a non-voter the node's raft has not reached. It never blocks the
// membership's signals, and each change is bounded by ChangeTimeout.
func (r *VoterReconciler) Term() leader.Term {
	var contact <-chan struct{} // nil, which never fires, for a node that does not signal
	if c, ok := r.node.(interface{ raftContact() <-chan struct{} }); ok {
		contact = c.raftContact()
	}
	return leader.Term{
		Watch:    r.cfg.Membership.Watch,
		Also:     contact,
		Interval: r.cfg.ReconcileInterval,
		Pass: func(ctx context.Context, _ leader.Wake) time.Time {
			r.reconcile(ctx)
			if r.sawUnreachable.Load() {
				return time.Now().Add(unreachableRecheck)
			}
			return time.Time{}
		},
	}
}

// reconcile runs passes back to back while they change something, at most maxPassesPerWake.
func (r *VoterReconciler) reconcile(ctx context.Context) {
	for range maxPassesPerWake {
		if ctx.Err() != nil {
			return
		}
		if applied, err := r.pass(ctx); applied == 0 || err != nil {
			return
		}
	}
}

// pass plans on the current configuration and membership and applies the plan in order, each
// change conditioned on the configuration index the previous one left. It stops at the first
// failure: the next pass plans again from what raft has.
func (r *VoterReconciler) pass(ctx context.Context) (applied int, err error) {
	defer r.passes.Add(1)
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("panic in a voter reconcile pass", "panic", p, "stack", string(debug.Stack()))
			err = errors.New("consensus: voter reconcile pass panicked")
		}
	}()
	cfg, index, err := r.node.configuration()
	if err != nil {
		if !errors.Is(err, ErrShutdown) { // a pass racing the node's shutdown is not news
			r.log.Warn("reading the raft configuration failed", "err", err)
		}
		return 0, err
	}
	opts := VoterOptions{Voters: r.cfg.Voters, DeadVoterGrace: r.cfg.DeadVoterGrace, Self: r.node.ID()}
	peers := slices.Clone(r.cfg.Membership.Peers())
	unreachable := false
	if hb, ok := r.node.(interface{ raftUnreachable(id string) bool }); ok {
		nonvoters := make(map[string]bool)
		for _, s := range cfg.Servers {
			nonvoters[string(s.ID)] = s.Suffrage != raft.Voter && string(s.ID) != opts.Self
		}
		pending, _ := r.node.(interface{ raftPending(id string) bool })
		for i := range peers {
			// Only a non-voter's contact decides anything (rule 5): voters, Self and peers
			// not in the configuration have none to wait for.
			peers[i].Unreachable = nonvoters[peers[i].ID] && hb.raftUnreachable(peers[i].ID)
			peers[i].Pending = peers[i].Unreachable && pending != nil && pending.raftPending(peers[i].ID)
			unreachable = unreachable || peers[i].Unreachable
		}
	}
	r.sawUnreachable.Store(unreachable)
	for _, c := range PlanMembership(cfg, peers, time.Now(), opts) {
		if err := ctx.Err(); err != nil {
			return applied, err
		}
		attrs := []any{"change", c.Kind.String(), "server", c.ID}
		if c.Address != "" {
			attrs = append(attrs, "address", c.Address)
		}
		attrs = append(attrs, "reason", c.Reason)
		deadline := time.Now().Add(r.cfg.ChangeTimeout)
		f := r.node.changeMembership(c, index, r.cfg.ChangeTimeout)
		next, err := waitIndex(ctx, f, time.Until(deadline))
		if c.Kind == ChangeTransferLeadership && (err == nil || ctx.Err() != nil) {
			// Done once this node no longer leads: its leader loop, and ctx, end then.
			r.log.Info("raft leadership handed over", attrs...)
			return applied + 1, nil
		}
		if err != nil {
			r.log.Warn("raft membership change failed", append(attrs, "err", err)...)
			return applied, err
		}
		r.log.Info("raft membership changed", attrs...)
		index = next
		applied++
	}
	return applied, nil
}

// waitIndex waits for f until timeout or ctx ends, and returns its index. The goroutine that
// waits on f outlives a timeout until raft resolves f (a commit, a lost leadership or a
// shutdown all do).
func waitIndex(ctx context.Context, f raft.IndexFuture, timeout time.Duration) (uint64, error) {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return 0, err
		}
		return f.Index(), nil
	case <-t.C:
		return 0, errChangeTimeout
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
