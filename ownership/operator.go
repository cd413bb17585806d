package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

// Records is the applied state an operator's move plans on; *consensus.Node implements it.
type Records interface {
	// WorkersShared returns every record; the moves only read them.
	WorkersShared() []fsm.Record
	// Draining returns the peers marked draining.
	Draining() []fsm.DrainingPeer
}

// Applier proposes a command on the leader, from any gateway; gateway/fleet.Writer implements it.
type Applier interface {
	Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error)
}

// ErrFenced: the worker's owner or epoch moved between the read and the write; nothing moved.
var ErrFenced = errors.New("fenced")

// OperatorConfig configures an Operator. The zero value of every optional field is its default.
type OperatorConfig struct {
	// Records, Membership and Apply are required.
	Records    Records
	Membership Membership
	Apply      Applier
	// MaxMovesPerEntry bounds the moves of one OperatorReassign entry. Zero means
	// DefaultMaxMovesPerEntry.
	MaxMovesPerEntry int
	// Metrics counts the moves. Nil means none.
	Metrics *Metrics
	// Logger receives one line per applied entry. Nil means slog.Default().
	Logger *slog.Logger
	// Now stamps drain marks and times the settle of a rebalance. Nil means time.Now.
	Now func() time.Time
}

// Operator makes an operator's ownership changes (DESIGN.md section 5): it plans with the pure
// decisions on the applied records and the mesh, and writes each plan as fenced OperatorReassign
// entries through Apply. It decides nothing about consistency: the caller runs a read barrier
// before (so that the plan reads what the leader has) and waits for the fleet after (the
// returned Index).
type Operator struct {
	cfg OperatorConfig
	log *slog.Logger
}

// NewOperator returns an Operator; it panics without Records, Membership or Apply.
func NewOperator(cfg OperatorConfig) *Operator {
	if cfg.Records == nil || cfg.Membership == nil || cfg.Apply == nil {
		panic("ownership: an Operator needs Records, Membership and Apply")
	}
	if cfg.MaxMovesPerEntry <= 0 {
		cfg.MaxMovesPerEntry = DefaultMaxMovesPerEntry
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Operator{cfg: cfg, log: cfg.Logger.With("component", "ownership")}
}

// Outcome is what a plan came to once written.
type Outcome struct {
	// Moves is the plan.
	Moves []Move
	// Moved are the workers whose owner changed (or was already the target: a re-sent entry).
	Moved []worker.ID
	// Skipped are the moves the FSM fenced off, with why.
	Skipped []fsm.ReassignSkip
	// Stuck are the workers of draining peers that cannot move (Drain only).
	Stuck []worker.ID
	// Index is the raft index of the last entry written, 0 when nothing was: what the caller
	// waits for the fleet to apply.
	Index uint64
}

// Peers returns the mesh's peers with their drain marks.
func (o *Operator) Peers() []Peer {
	return WithDraining(o.cfg.Membership.Peers(), o.cfg.Records.Draining())
}

// WithDraining sets Draining on the peers that marks names.
func WithDraining(peers []Peer, marks []fsm.DrainingPeer) []Peer {
	if len(marks) == 0 {
		return peers
	}
	draining := make(map[string]bool, len(marks))
	for _, m := range marks {
		draining[m.ID] = true
	}
	out := make([]Peer, len(peers))
	for i, p := range peers {
		p.Draining = p.Draining || draining[p.ID]
		out[i] = p
	}
	return out
}

// Transfer moves the worker rec to the peer to (PlanTransfer), fenced on the owner and epoch
// of rec. A *TransferError says why the plan refused; ErrFenced that the record moved under it.
// An Outcome without moves means to already owns it.
func (o *Operator) Transfer(ctx context.Context, rec fsm.Record, to string) (Outcome, error) {
	ws := workersOf([]fsm.Record{rec})
	m, ok, err := PlanTransfer(ws[0], to, o.Peers())
	if err != nil || !ok {
		return Outcome{}, err
	}
	out, err := o.write(ctx, ReasonTransfer, drainMarks{}, []Move{m})
	if err != nil {
		return out, err
	}
	if len(out.Moved) == 0 && len(out.Skipped) > 0 {
		if reason := out.Skipped[0].Reason; reason == to+" is draining" { // marked after the plan read
			return out, &TransferError{ErrPeerUnavailable, reason + ": it takes no workers"}
		}
		return out, fmt.Errorf("%w: %s", ErrFenced, out.Skipped[0].Reason)
	}
	return out, nil
}

// Rebalance plans the fewest moves that even out ownership (PlanRebalance, every peer counted as
// settled) and, unless dryRun, writes them.
func (o *Operator) Rebalance(ctx context.Context, dryRun bool) (Outcome, error) {
	return o.rebalance(ctx, dryRun, 0)
}

func (o *Operator) rebalance(ctx context.Context, dryRun bool, settle time.Duration) (Outcome, error) {
	moves := PlanRebalance(workersOf(o.cfg.Records.WorkersShared()), o.Peers(), o.cfg.Now(), settle)
	if dryRun || len(moves) == 0 {
		return Outcome{Moves: moves}, nil
	}
	return o.write(ctx, ReasonRebalance, drainMarks{}, moves)
}

// Drain marks peers draining and moves their workers to the peers that are not (PlanHandoff),
// the marks and the first moves in one entry. Each mark names the process of its peer the mesh
// lists (its start time), so that the gateway started again is not drained by it. Peers
// already marked are planned for as well.
func (o *Operator) Drain(ctx context.Context, peers []string) (Outcome, error) {
	all := o.Peers()
	asked := make(map[string]bool, len(peers))
	for _, p := range peers {
		asked[p] = true
	}
	started := make(map[string]time.Time)
	for i, p := range all {
		all[i].Draining = p.Draining || asked[p.ID]
		if asked[p.ID] && !p.Started.IsZero() {
			started[p.ID] = p.Started
		}
	}
	moves, stuck := PlanHandoff(workersOf(o.cfg.Records.WorkersShared()), all)
	out, err := o.write(ctx, ReasonDrain, drainMarks{peers, started}, moves)
	out.Stuck = stuck
	return out, err
}

// drainMarks are the marks a Drain writes: the peers, and the start time of the process of each
// the mesh lists.
type drainMarks struct {
	peers   []string
	started map[string]time.Time
}

// write applies moves in OperatorReassign entries of at most MaxMovesPerEntry, the drain marks with
// the first, and sums what they did. It stops at the first error.
func (o *Operator) write(ctx context.Context, reason Reason, drain drainMarks, moves []Move) (Outcome, error) {
	out := Outcome{Moves: moves}
	for first := true; first || len(moves) > 0; first = false {
		n := min(len(moves), o.cfg.MaxMovesPerEntry)
		batch := moves[:n]
		moves = moves[n:]
		cmd := fsm.OperatorReassign{Reason: reason.String(), At: o.cfg.Now(), Items: make([]fsm.ReassignItem, len(batch))}
		if first {
			cmd.Drain, cmd.Started = drain.peers, drain.started
		}
		for i, m := range batch {
			cmd.Items[i] = fsm.ReassignItem{ID: m.ID, From: fsm.Fence{Owner: m.From, Epoch: m.Epoch}, To: m.To}
		}
		res, err := o.cfg.Apply.Apply(ctx, cmd)
		if err != nil {
			return out, err
		}
		out.Index = res.Index
		moved, skipped := settled(res.Reassign, batch)
		out.Moved = append(out.Moved, moved...)
		out.Skipped = append(out.Skipped, skipped...)
		if res.Reassign != nil {
			o.cfg.Metrics.countMoves(reason, len(res.Reassign.Moved)) // a re-sent copy's are counted once
		}
		o.log.Info("ownership changed", "reason", reason.String(), "drain", strings.Join(drain.peers, ","), "moves", len(batch),
			"moved", len(moved), "skipped", len(skipped), "index", res.Index)
	}
	return out, nil
}

// settled splits an OperatorReassign's result into the workers that are where the moves sent them
// (moved, or already there: a re-sent copy) and the skips that left them elsewhere.
func settled(r *fsm.ReassignResult, batch []Move) (moved []worker.ID, skipped []fsm.ReassignSkip) {
	if r == nil {
		return nil, nil
	}
	to := make(map[worker.ID]string, len(batch))
	for _, m := range batch {
		to[m.ID] = m.To
	}
	moved = append(moved, r.Moved...)
	for _, s := range r.Skipped {
		if s.Reason == "already owned by "+to[s.ID] {
			moved = append(moved, s.ID)
			continue
		}
		skipped = append(skipped, s)
	}
	return moved, skipped
}
