package voters

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

// Defaults of Config.
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
	// node's contact signal (Contact.RaftContact) wakes the duty as soon as it answers; this
	// backs it up.
	unreachableRecheck = time.Second
)

// errChangeTimeout says a configuration change was handed to raft but not known to commit in
// time. The next pass reads the configuration again, whatever became of it.
var errChangeTimeout = errors.New("voters: the membership change did not commit in time")

// Membership is the mesh's view of the peers, as the Reconciler reads it. Package server adapts
// the mesh's members to it.
type Membership interface {
	// Peers returns every peer the mesh knows, this node included, foreign peers left out.
	Peers() []Peer
	// Watch returns a channel that receives after membership changes and a function that stops
	// the watch. The sender must never block on it (a buffer of one, sent without waiting, so
	// signals coalesce): the reconciler reads Peers anew on each signal and on a timer, so a
	// dropped signal costs nothing.
	Watch() (<-chan struct{}, func())
}

// Raft is the raft node whose configuration a Reconciler changes; *consensus.Node implements it.
type Raft interface {
	// ID returns the node's raft server id, Self of the plans.
	ID() string
	// Configuration returns the latest raft configuration (committed or not) and its index. Once
	// the node is shut down it fails with an error that wraps raft.ErrRaftShutdown.
	Configuration() (raft.Configuration, uint64, error)
	// ChangeMembership hands c to raft, refused unless the configuration is still at prevIndex;
	// timeout bounds only the hand-over. The future resolves once the configuration entry
	// commits (a leadership transfer: once it is done; its index is then prevIndex), leadership
	// is lost or raft shuts down.
	ChangeMembership(c Change, prevIndex uint64, timeout time.Duration) raft.IndexFuture
}

// Contact is what a Raft may also tell of its raft's contact with the peers while it leads;
// *consensus.Node implements it. A Reconciler over a Raft without it takes every peer as reached.
type Contact interface {
	// RaftUnreachable reports whether the node's raft has had no answer from peer id since it
	// leads or since the peer's last failed heartbeat (Peer.Unreachable).
	RaftUnreachable(id string) bool
	// RaftPending reports whether the node's raft has neither reached peer id nor failed to
	// yet (Peer.Pending).
	RaftPending(id string) bool
	// RaftContact signals, coalesced, when a peer the node's raft had not reached answers.
	RaftContact() <-chan struct{}
}

// Config configures a Reconciler. The zero value of every optional field is
// its default.
type Config struct {
	// Node is the raft node whose configuration the reconciler manages. Required.
	Node Raft
	// Membership is the mesh's view of the peers. Required.
	Membership Membership
	// Voters is --raft-voters. Zero (the default) chooses it by the fleet's size (AutoCount).
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

// Reconciler is the leader's duty of reconciling the mesh's membership into the raft
// configuration (DESIGN.md section 3, Voters) with Plan: a pass when a term starts, on each
// membership signal and every ReconcileInterval. It is a leader.Duty, run by the node's
// consensus.Config.LeaderLoop:
//
//	var duties leader.Loop
//	cfg.LeaderLoop = duties.Run
//	node, err := consensus.Start(cfg)
//	r, err := voters.NewReconciler(voters.Config{Node: node, Membership: m})
//	duties.Set(r)
type Reconciler struct {
	cfg  Config
	log  *slog.Logger
	node Raft

	passes atomic.Uint64 // passes finished (Passes)
	// sawUnreachable says the last pass found a non-voter its node's raft has not reached (the
	// duty then passes again after unreachableRecheck, or at the node's contact signal).
	sawUnreachable atomic.Bool
}

// NewReconciler returns the reconciler of cfg.Node's configuration.
func NewReconciler(cfg Config) (*Reconciler, error) {
	if cfg.Node == nil {
		return nil, errors.New("voters: the reconciler needs a Node")
	}
	if cfg.Membership == nil {
		return nil, errors.New("voters: the reconciler needs a Membership")
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
	return &Reconciler{cfg: cfg, log: cfg.Logger.With("component", "voters"), node: cfg.Node}, nil
}

// Passes returns how many passes the reconciler finished, whatever they changed: a test waits
// on it for a pass that follows a membership signal.
func (r *Reconciler) Passes() uint64 { return r.passes.Load() }

// Term implements leader.Duty: reconcile at the start, on each membership signal, on the node's
// signal that its raft reached a peer, every ReconcileInterval, and unreachableRecheck after a
// pass that found a non-voter the node's raft has not reached. It never blocks the
// membership's signals, and each change is bounded by ChangeTimeout. The term clocks the
// servers of the configuration that the mesh does not list from its own start (unlisted).
func (r *Reconciler) Term() leader.Term {
	missing := make(unlisted)
	var contact <-chan struct{} // nil, which never fires, for a node that does not signal
	if c, ok := r.node.(Contact); ok {
		contact = c.RaftContact()
	}
	return leader.Term{
		Watch:    r.cfg.Membership.Watch,
		Also:     contact,
		Interval: r.cfg.ReconcileInterval,
		Pass: func(ctx context.Context, _ leader.Wake) time.Time {
			r.reconcile(ctx, missing)
			if r.sawUnreachable.Load() {
				return time.Now().Add(unreachableRecheck)
			}
			return time.Time{}
		},
	}
}

// reconcile runs passes back to back while they change something, at most maxPassesPerWake.
func (r *Reconciler) reconcile(ctx context.Context, missing unlisted) {
	for range maxPassesPerWake {
		if ctx.Err() != nil {
			return
		}
		if applied, err := r.pass(ctx, missing); applied == 0 || err != nil {
			return
		}
	}
}

// pass plans on the current configuration and membership, with the servers of the
// configuration that the mesh does not list as unknown since missing clocked them, and
// applies the plan in order, each change conditioned on the configuration index the previous
// one left. It stops at the first failure: the next pass plans again from what raft has.
func (r *Reconciler) pass(ctx context.Context, missing unlisted) (applied int, err error) {
	defer r.passes.Add(1)
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("panic in a voter reconcile pass", "panic", p, "stack", string(debug.Stack()))
			err = errors.New("voters: reconcile pass panicked")
		}
	}()
	cfg, index, err := r.node.Configuration()
	if err != nil {
		if !errors.Is(err, raft.ErrRaftShutdown) { // a pass racing the node's shutdown is not news
			r.log.Warn("reading the raft configuration failed", "err", err)
		}
		return 0, err
	}
	opts := Options{Voters: r.cfg.Voters, DeadVoterGrace: r.cfg.DeadVoterGrace, Self: r.node.ID()}
	peers := slices.Clone(r.cfg.Membership.Peers())
	unreachable := false
	if hb, ok := r.node.(Contact); ok {
		nonvoters := make(map[string]bool)
		for _, s := range cfg.Servers {
			nonvoters[string(s.ID)] = s.Suffrage != raft.Voter && string(s.ID) != opts.Self
		}
		for i := range peers {
			// Only a non-voter's contact decides anything (rule 8): voters, Self and peers
			// not in the configuration have none to wait for.
			peers[i].Unreachable = nonvoters[peers[i].ID] && hb.RaftUnreachable(peers[i].ID)
			peers[i].Pending = peers[i].Unreachable && hb.RaftPending(peers[i].ID)
			unreachable = unreachable || peers[i].Unreachable
		}
	}
	r.sawUnreachable.Store(unreachable)
	now := time.Now()
	for _, c := range Plan(cfg, missing.peers(cfg, peers, now), now, opts) {
		if err := ctx.Err(); err != nil {
			return applied, err
		}
		attrs := []any{"change", c.Kind.String(), "server", c.ID}
		if c.Address != "" {
			attrs = append(attrs, "address", c.Address)
		}
		attrs = append(attrs, "reason", c.Reason)
		deadline := time.Now().Add(r.cfg.ChangeTimeout)
		f := r.node.ChangeMembership(c, index, r.cfg.ChangeTimeout)
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
// shutdown; one raft holds in its FSM queue as it shuts down is never resolved, hashicorp/raft
// issue 498, and its goroutine stays parked).
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
