package main

import (
	"context"
	"time"

	"github.com/meshgw/meshgw/gateway/fleet"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/ownership"
)

const (
	// defaultDrainTimeout is --drain-timeout-secs.
	defaultDrainTimeout = 120 * time.Second
)

// DrainStates implements admin.Drains: the progress of the drains of peers (of every peer marked
// draining when peers is empty), from this gateway's applied records, its mesh and the raft
// configuration it knows.
func (c *cluster) DrainStates(peers []string) []ownership.DrainState {
	return c.drainView().States(peers)
}

// drainView reads drains' progress as this gateway knows it.
func (c *cluster) drainView() ownership.DrainView {
	return ownership.DrainView{Records: c.node, Membership: c.owners, Raft: c.raftView}
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

// drainDuty runs this gateway's part of its own drain (ownership.DrainDuty) until it left the
// mesh, which closes left, or the gateway stops.
func (c *cluster) drainDuty(gw ownership.DataPlane, left chan<- struct{}) {
	d := ownership.DrainDuty{Self: c.nodeID, Started: c.startTime, View: c.drainView(), Changes: c.node.Watch,
		Barrier: c.acks.Barrier, CaughtUp: c.caughtUp, Gateway: gw, Leave: c.leave, Logger: c.log}
	d.Run(c.ctx, left)
}

// leaveOnTerminate drains this gateway as POST /mesh/drain {"peer": self} does, then waits until
// the drain duty left the mesh or the timeout passed. A mesh without another alive gateway is
// not drained: there is nobody to hand over to, and a quick restart comes back as the owner.
func (c *cluster) leaveOnTerminate(op *ownership.Operator, gw ownership.DataPlane, left <-chan struct{}, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	gw.WithdrawReadiness()
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
