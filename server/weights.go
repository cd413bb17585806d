package server

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/gateway/admin"
	"github.com/meshgw/meshgw/gateway/fleet"
	"github.com/meshgw/meshgw/gateway/weights"
)

// startWeights makes the weight update's coordinator of this gateway (POST
// /update_weights_from_disk) and its watch of unfinished records. With raft in memory
// (ephemeral, --ephemeral) there is none: the route answers 503, since nothing durable could
// record an update. The returned function stops the watch.
func startWeights(ephemeral bool, nodeID string, node *consensus.Node, writer *fleet.Writer, cl *cluster,
	reg prometheus.Registerer, log *slog.Logger, a *admin.Config) (func(), error) {
	m, err := weights.NewMetrics(reg, func() int { return len(node.Journal()) })
	if err != nil {
		return nil, err
	}
	if ephemeral {
		return func() {}, nil
	}
	var fleetAck weights.Fleet
	if cl.acks != nil {
		fleetAck = cl.acks
	}
	c := weights.New(weights.Config{NodeID: nodeID, Writer: writer, Records: node, Fleet: fleetAck,
		Send: weights.HTTPSender{NodeID: nodeID}, Metrics: m, Logger: log})
	a.Weights = c
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		select { // judge the records only once this gateway's raft state is current
		case <-cl.caughtUp:
			c.Watch(ctx, cl.mesh, node, 0)
		case <-ctx.Done():
		}
	}()
	return func() { cancel(); <-done }, nil
}
