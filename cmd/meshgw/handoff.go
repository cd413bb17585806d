package main

import (
	"context"
	"slices"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/fleet"
	"github.com/meshgw/meshgw/leader"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/ownership"
)

const (
	// defaultDrainTimeout is --drain-timeout-secs.
	defaultDrainTimeout = 120 * time.Second
	// drainDutyPoll backs up the applied state's signals in the drain duty: a change of the raft
	// configuration (a demotion) has no signal of its own.
	drainDutyPoll = 250 * time.Millisecond
	// drainConfirmTimeout bounds the read barrier that confirms this gateway's drain mark.
	drainConfirmTimeout = 5 * time.Second
)

// DrainStates implements admin.Drains: the progress of the drains of peers (of every peer marked
// draining when peers is empty), from this gateway's applied records, its mesh and the raft
// configuration it knows.
func (c *cluster) DrainStates(peers []string) []ownership.DrainState {
	marks := c.node.Draining()
	if len(peers) == 0 {
		for _, d := range marks {
			peers = append(peers, d.ID)
		}
	}
	return ownership.DrainStates(peers, marks, workersOf(c.node.WorkersShared()), c.owners.Peers(), c.raftView())
}

// raftView is the raft configuration this node knows, as the drain decisions read it.
func (c *cluster) raftView() ownership.RaftView {
	var view ownership.RaftView
	if info, err := c.node.Info(); err == nil {
		view.Leader = info.Leader
		view.Servers = make(map[string]string, len(info.Servers))
		for _, s := range info.Servers {
			view.Servers[s.ID] = s.Suffrage
		}
	}
	return view
}

// drainClearer is the leader's duty of clearing the drain marks of the gateways whose drain is
// over (ownership.Finished): gone from the mesh and the raft configuration, owning nothing, or
// started again since (the mesh lists another process of it). A gateway started again with the
// same id, before or after its mark is cleared, then joins as a new gateway. Every leader runs
// it, so a mark the last leader left is cleared by the next. It passes on membership and drain
// signals, and every second (a configuration change has no signal).
type drainClearer struct{ c *cluster }

// Term implements leader.Duty.
func (d drainClearer) Term() leader.Term {
	c := d.c
	return leader.Term{
		Watch:    c.owners.Watch,
		Interval: time.Second,
		Pass: func(ctx context.Context, _ leader.Wake) time.Time {
			if marks := c.node.Draining(); len(marks) > 0 {
				if done := ownership.Finished(marks, workersOf(c.node.WorkersShared()), c.owners.Peers(), c.raftView()); len(done) > 0 {
					c.clearMarks(ctx, done)
				}
			}
			return time.Time{}
		},
	}
}

// clearMarks clears the drain marks of the drains states says are over, in one raft entry.
func (c *cluster) clearMarks(ctx context.Context, states []ownership.DrainState) {
	var ids, restarted []string
	for _, s := range states {
		ids = append(ids, s.Peer)
		if s.Restarted {
			restarted = append(restarted, s.Peer)
		}
	}
	if _, err := c.node.Apply(ctx, fsm.Handoff{Reason: ownership.ReasonDrain.String(), Undrain: ids, At: time.Now()}); err != nil {
		c.log.Warn("clearing the marks of finished drains did not apply; the next pass tries again", "peers", ids, "err", err)
		return
	}
	c.log.Info("drains finished: marks cleared; a gateway started again joins as a new one", "peers", ids, "started_again", restarted)
}

// workersOf reads the records as the ownership decisions do.
func workersOf(recs []fsm.Record) []ownership.Worker {
	out := make([]ownership.Worker, len(recs))
	for i, r := range recs {
		out[i] = ownership.Worker{ID: r.ID, Owner: r.Owner, Epoch: r.Epoch, Region: r.Spec.Region, HostLocal: r.Spec.HostLocal()}
	}
	return out
}

// handingOff is the data plane as the drain duty drives it; *gateway.Gateway implements it.
// HandOff turns readiness 503 draining while the gateway still follows the fleet; LeaveMesh,
// called as it leaves the mesh, makes new model requests answer 503 draining, since its pool
// stops following the fleet then.
type handingOff interface {
	HandOff()
	LeaveMesh()
}

// drainDuty is this gateway's part of its own drain (DESIGN.md section 5, Handoff), run once its
// raft state is current. Its steps are nextDrainStep's: once the leader's state marks this
// process draining (read after a barrier, so that an entry replayed while catching up after a
// pause is not taken for the leader's state), readiness turns 503 draining; once it owns no
// worker that can move, does not lead and holds no voter seat, it closes its data plane to new
// requests (gw.LeaveMesh) and leaves the mesh, and the leader removes it from the raft
// configuration. left is closed then. A mark that names an
// earlier process of this gateway is not for it: that drain is over, and the leader clears it.
func (c *cluster) drainDuty(gw handingOff, left chan<- struct{}) {
	select {
	case <-c.caughtUp: // a restarted gateway's old marks are cleared by catching up first
	case <-c.ctx.Done():
		return
	}
	changes, stop := c.node.Watch()
	defer stop()
	tick := time.NewTicker(drainDutyPoll)
	defer tick.Stop()
	handedOff := false
	for {
		marked, ready := c.markedDraining(), false
		var s []ownership.DrainState
		if handedOff && marked {
			s = c.DrainStates([]string{c.nodeID})
			ready = len(s) == 1 && s[0].Owned == s[0].Stuck && !s[0].Leader && s[0].Raft != "voter"
		}
		switch nextDrainStep(handedOff, marked, ready) {
		case drainConfirm:
			if c.confirmMarked() {
				handedOff = true
				c.log.Info("this gateway is being drained: its workers, raft leadership and voter seat go to gateways that stay")
				gw.HandOff()
				continue
			}
		case drainLeave, drainLeaveUnmarked:
			if marked {
				c.log.Info("drained: leaving the mesh", "stuck_workers", s[0].Stuck)
			} else {
				c.log.Info("drained: the leader finished this gateway's drain while it was cut off (it saw it gone); leaving the mesh")
			}
			gw.LeaveMesh()
			c.leave()
			close(left)
			return
		}
		select {
		case <-c.ctx.Done():
			return
		case <-changes:
		case <-tick.C:
		}
	}
}

// confirmMarked reports whether this process is still marked draining once it applied the
// leader's commit index (a read barrier, bounded): false when no leader answered.
func (c *cluster) confirmMarked() bool {
	ctx, cancel := context.WithTimeout(c.ctx, drainConfirmTimeout)
	defer cancel()
	if err := c.acks.Barrier(ctx); err != nil {
		c.log.Debug("the drain mark of this gateway is not confirmed yet: no answer from the leader", "err", err)
		return false
	}
	return c.markedDraining()
}

// markedDraining reports whether the applied state marks this process of the gateway draining:
// a mark of its id that names this process, or none.
func (c *cluster) markedDraining() bool {
	return slices.ContainsFunc(c.node.Draining(), func(d fsm.DrainingPeer) bool { return d.ID == c.nodeID && d.For(c.startTime) })
}

// leaveOnTerminate drains this gateway as POST /mesh/drain {"peer": self} does, then waits until
// the drain duty left the mesh or the timeout passed. A mesh without another alive gateway is
// not drained: there is nobody to hand over to, and a quick restart comes back as the owner.
func (c *cluster) leaveOnTerminate(op *ownership.Operator, gw handingOff, left <-chan struct{}, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	gw.HandOff()
	others := 0
	for _, p := range op.Peers() {
		if p.ID != c.nodeID && p.Status == mesh.StatusAlive && !p.Draining {
			others++
		}
	}
	if others == 0 {
		c.log.Warn("--leave-on-terminate: no other alive gateway takes the workers; stopping without a drain")
		return
	}
	c.log.Info("--leave-on-terminate: draining this gateway before it stops", "timeout", timeout)
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		out, err := op.Drain(ctx, []string{c.nodeID})
		if err == nil {
			c.log.Info("--leave-on-terminate: workers handed off", "moved", len(out.Moved), "stuck", len(out.Stuck))
			break
		}
		if !fleet.Retryable(err) || ctx.Err() != nil {
			c.log.Warn("--leave-on-terminate: the drain did not apply; stopping with this gateway's workers", "err", err)
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	select {
	case <-left:
		c.log.Info("--leave-on-terminate: drained and left the mesh")
	case <-ctx.Done():
		c.log.Warn("--leave-on-terminate: the drain did not finish in time", "left", c.DrainStates([]string{c.nodeID}))
	}
}
