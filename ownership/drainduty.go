package ownership

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/leader"
)

const (
	// drainDutyPoll backs up the applied state's signals in the drain duty: a change of the raft
	// configuration (a demotion) has no signal of its own.
	drainDutyPoll = 250 * time.Millisecond
	// drainConfirmTimeout bounds the read barrier that confirms this gateway's drain mark.
	drainConfirmTimeout = 5 * time.Second
	// drainClearInterval is how often the leader looks for finished drains besides the
	// membership and drain signals (a configuration change has none).
	drainClearInterval = time.Second
)

// DrainView reads the progress of drains from a gateway's applied records, its mesh and the raft
// configuration it knows.
type DrainView struct {
	// Records are the applied records and drain marks (*consensus.Node).
	Records Records
	// Membership is the mesh's view of the peers.
	Membership Membership
	// Raft is the raft configuration as this gateway knows it.
	Raft func() RaftView
}

// States returns the progress of the drains of peers, of every peer marked draining when peers
// is empty (admin.Drains).
func (v DrainView) States(peers []string) []DrainState {
	marks := v.Records.Draining()
	if len(peers) == 0 {
		for _, d := range marks {
			peers = append(peers, d.ID)
		}
	}
	return DrainStates(peers, marks, workersOf(v.Records.WorkersShared()), v.Membership.Peers(), v.Raft())
}

// DrainClearer is the leader's duty of clearing the drain marks of the gateways whose drain is
// over (Finished): gone from the mesh and the raft configuration, owning nothing, or started
// again since (the mesh lists another process of it). A gateway started again with the same
// id, before or after its mark is cleared, then joins as a new gateway. Every leader runs it, so
// a mark the last leader left is cleared by the next. It is a leader.Duty that passes on
// membership and drain signals, and every second (a configuration change has no signal).
type DrainClearer struct {
	View DrainView
	// Apply writes the entry that clears the marks (the leader's own node).
	Apply Applier
	// Logger receives a line per clearing. Nil means slog.Default().
	Logger *slog.Logger
}

// Term implements leader.Duty.
func (d DrainClearer) Term() leader.Term {
	return leader.Term{
		Watch:    d.View.Membership.Watch,
		Interval: drainClearInterval,
		Pass: func(ctx context.Context, _ leader.Wake) time.Time {
			if marks := d.View.Records.Draining(); len(marks) > 0 {
				if done := Finished(marks, workersOf(d.View.Records.WorkersShared()), d.View.Membership.Peers(), d.View.Raft()); len(done) > 0 {
					d.clear(ctx, done)
				}
			}
			return time.Time{}
		},
	}
}

// clear clears the drain marks of the drains states says are over, in one raft entry.
func (d DrainClearer) clear(ctx context.Context, states []DrainState) {
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	var ids, restarted []string
	for _, s := range states {
		ids = append(ids, s.Peer)
		if s.Restarted {
			restarted = append(restarted, s.Peer)
		}
	}
	if _, err := d.Apply.Apply(ctx, fsm.OperatorReassign{Reason: ReasonDrain.String(), Undrain: ids, At: time.Now()}); err != nil {
		log.Warn("clearing the marks of finished drains did not apply; the next pass tries again", "peers", ids, "err", err)
		return
	}
	log.Info("drains finished: marks cleared; a gateway started again joins as a new one", "peers", ids, "started_again", restarted)
}

// DataPlane is the data plane as the drain duty drives it; *gateway.Gateway implements it.
// WithdrawReadiness turns readiness 503 draining while the gateway still follows the fleet;
// LeaveMesh, called as it leaves the mesh, makes new model requests answer 503 draining, since
// its pool stops following the fleet then.
type DataPlane interface {
	WithdrawReadiness()
	LeaveMesh()
}

// DrainDuty is a gateway's part of its own drain (DESIGN.md section 5, Handoff), run once its
// raft state is current. Its steps are nextDrainStep's: once the leader's state marks this
// process draining (read after a barrier, so that an entry replayed while catching up after a
// pause is not taken for the leader's state), readiness turns 503 draining; once it owns no
// worker that can move, does not lead and holds no voter seat, it closes its data plane to new
// requests (LeaveMesh) and leaves the mesh, and the leader removes it from the raft
// configuration. A mark that names an earlier process of this gateway is not for it: that drain
// is over, and the leader clears it.
type DrainDuty struct {
	// Self is this gateway's node id; Started names its process (mesh.Meta.Started), which a
	// drain mark is for.
	Self    string
	Started time.Time
	View    DrainView
	// Changes signals changes of the applied state (consensus.Node.Watch).
	Changes func() (<-chan struct{}, func())
	// Barrier waits until this gateway applied the leader's commit index.
	Barrier func(ctx context.Context) error
	// CaughtUp is closed once this gateway's raft state is current.
	CaughtUp <-chan struct{}
	// Gateway is the data plane whose readiness it withdraws and which it closes.
	Gateway DataPlane
	// Leave leaves the mesh gracefully.
	Leave func()
	// Logger receives a line per step. Nil means slog.Default().
	Logger *slog.Logger
}

// Run runs the duty until ctx ends or this gateway left the mesh, and closes left then.
func (d *DrainDuty) Run(ctx context.Context, left chan<- struct{}) {
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	select {
	case <-d.CaughtUp: // a restarted gateway's old marks are cleared by catching up first
	case <-ctx.Done():
		return
	}
	changes, stop := d.Changes()
	defer stop()
	tick := time.NewTicker(drainDutyPoll)
	defer tick.Stop()
	confirmed := false
	for {
		marked, ready := d.marked(), false
		var s []DrainState
		if confirmed && marked {
			s = d.View.States([]string{d.Self})
			ready = len(s) == 1 && s[0].Owned == s[0].Stuck && !s[0].Leader && s[0].Raft != "voter"
		}
		switch nextDrainStep(confirmed, marked, ready) {
		case drainConfirm:
			if d.confirmMarked(ctx, log) {
				confirmed = true
				log.Info("this gateway is being drained: its workers, raft leadership and voter seat go to gateways that stay")
				d.Gateway.WithdrawReadiness()
				continue
			}
		case drainLeave, drainLeaveUnmarked:
			if marked {
				log.Info("drained: leaving the mesh", "stuck_workers", s[0].Stuck)
			} else {
				log.Info("drained: the leader finished this gateway's drain while it was cut off (it saw it gone); leaving the mesh")
			}
			d.Gateway.LeaveMesh()
			d.Leave()
			close(left)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-tick.C:
		}
	}
}

// confirmMarked reports whether this process is still marked draining once it applied the
// leader's commit index (a read barrier, bounded): false when no leader answered.
func (d *DrainDuty) confirmMarked(ctx context.Context, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(ctx, drainConfirmTimeout)
	defer cancel()
	if err := d.Barrier(ctx); err != nil {
		log.Debug("the drain mark of this gateway is not confirmed yet: no answer from the leader", "err", err)
		return false
	}
	return d.marked()
}

// marked reports whether the applied state marks this process of the gateway draining: a mark
// of its id that names this process, or none.
func (d *DrainDuty) marked() bool {
	return slices.ContainsFunc(d.View.Records.Draining(), func(m fsm.DrainingPeer) bool { return m.ID == d.Self && m.For(d.Started) })
}
