package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/gateway/fleet"
)

// startFleetAck makes the fleet acknowledgements and read barriers of this gateway (see
// consensus.FleetAck) and registers their gRPC service; the cluster's gRPC listener must not
// serve yet. Its data plane is the reconciler, set later with c.applied.
func (c *cluster) startFleetAck() error {
	a, err := consensus.NewFleetAck(c.node, consensus.FleetAckOptions{
		Local: &c.applied, Members: c.mesh, ResolveRPC: c.resolveRPC,
		Timeout: time.Duration(c.o.cluster.fleetAckTimeout) * time.Second, Credentials: c.o.tls.dialCreds(), DialOptions: c.o.tls.keyDialOptions(), Logger: c.base,
		Registerer: c.reg,
	})
	if err != nil {
		return err
	}
	a.Register(c.rpc)
	c.acks = a
	c.applied.node = c.node
	return nil
}

// lateApplied hands the fleet acknowledgements the reconciler, which is built after the
// cluster because it drives the gateway's pool. Until then this gateway acknowledges nothing.
// An index is acknowledged once the pool applied it and a restart would serve it
// (consensus.Node.WaitSaved: the saved state holds it, or the commit index stored with the raft
// log covers it), so that an acknowledged write holds from the first request after a restart
// (fail-static).
type lateApplied struct {
	r    atomic.Pointer[fleet.Reconciler]
	node *consensus.Node
}

func (l *lateApplied) WaitApplied(ctx context.Context, index uint64) uint64 {
	r := l.r.Load()
	if r == nil {
		return 0
	}
	got := r.WaitApplied(ctx, index)
	if got < index || l.node == nil {
		return got
	}
	return min(got, l.node.WaitSaved(ctx, index))
}
