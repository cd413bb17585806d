package server

import (
	"github.com/meshgw/meshgw/consensus/fleetack"
)

// startFleetAck makes the fleet acknowledgements and read barriers of this gateway (see
// fleetack.FleetAck) and registers their gRPC service; the cluster's gRPC listener must not
// serve yet. Its data plane, the reconciler, is set later (FleetAck.SetLocal): until then this
// gateway acknowledges nothing. An index is acknowledged once the pool applied it and a restart
// would serve it (consensus.Node.WaitSaved), so that an acknowledged write holds from the first
// request after a restart (fail-static).
func (c *cluster) startFleetAck() error {
	a, err := fleetack.New(c.node, fleetack.Options{
		Saved: c.node, Members: c.mesh, ResolveRPC: c.resolveRPC,
		Timeout: c.cfg.Cluster.FleetAckTimeout, Credentials: c.sec.dialCreds(), DialOptions: c.sec.keyDialOptions(), Logger: c.base,
		Registerer: c.reg,
	})
	if err != nil {
		return err
	}
	a.Register(c.rpc)
	c.acks = a
	return nil
}
