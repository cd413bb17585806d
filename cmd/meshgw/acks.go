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
		Timeout: time.Duration(c.o.cluster.fleetAckTimeout) * time.Second, Logger: c.base,
	})
	if err != nil {
		return err
	}
	a.Register(c.rpc)
	c.acks = a
	return nil
}

// lateApplied hands the fleet acknowledgements the reconciler, which is built after the
// cluster because it drives the gateway's pool. Until then this gateway acknowledges nothing.
type lateApplied struct {
	r atomic.Pointer[fleet.Reconciler]
}

func (l *lateApplied) WaitApplied(ctx context.Context, index uint64) uint64 {
	if r := l.r.Load(); r != nil {
		return r.WaitApplied(ctx, index)
	}
	return 0
}
