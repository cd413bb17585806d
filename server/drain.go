package server

import (
	"time"

	"github.com/meshgw/meshgw/gateway/fleet"
	"github.com/meshgw/meshgw/ownership"
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

// leaveOnTerminate drains this gateway as it stops (ownership.LeaveOnTerminate).
func (c *cluster) leaveOnTerminate(op *ownership.Operator, gw ownership.DataPlane, left <-chan struct{}, timeout time.Duration) {
	ownership.LeaveOnTerminate{Self: c.nodeID, Operator: op, Gateway: gw, Retryable: fleet.Retryable,
		States: func() any { return c.DrainStates([]string{c.nodeID}) }, Logger: c.log}.Run(left, timeout)
}
