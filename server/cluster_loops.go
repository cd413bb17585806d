package server

import (
	"errors"
	"fmt"
	"strings"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/mesh"
)

// joinLoop joins the mesh through addrs, retrying with a doubling backoff until one answers or
// the gateway stops. It never blocks the data plane; memberlist's gossip keeps the membership
// after the first success. A join that cannot succeed however often it is tried (cannotJoin)
// stops the gateway instead.
func (c *cluster) joinLoop(addrs []string) {
	backoff := joinBackoffMin
	for attempt := 1; ; attempt++ {
		n, err := c.mesh.Join(addrs)
		if err == nil && n > 0 {
			c.log.Info("joined the mesh", "reached", n, "of", len(addrs), "alive", c.mesh.Count(mesh.StatusAlive))
			return
		}
		if why := c.cannotJoin(addrs, err); why != nil {
			c.fail(why)
			return
		}
		c.log.Warn("joining the mesh failed; retrying"+joinHint(err), "join", strings.Join(addrs, ","), "attempt", attempt, "retry_in", backoff, "err", err)
		if !c.wait(backoff) {
			return
		}
		backoff = min(2*backoff, joinBackoffMax)
	}
}

// cannotJoin is the error that stops the gateway when a join failed for good, nil when trying
// again may succeed:
//   - another live gateway uses this node id: peers refuse every message of this gateway for as
//     long as that one runs (mesh.NodeIDTakenError);
//   - the peers belong to another raft cluster: this gateway's cluster id comes from its state
//     directory and theirs from theirs, and neither ever changes (mesh.ErrForeignCluster).
func (c *cluster) cannotJoin(addrs []string, err error) error {
	var taken *mesh.NodeIDTakenError
	switch {
	case errors.As(err, &taken):
		return fmt.Errorf("--node-id %s is already used by a live gateway at %s; give each gateway its own node id", taken.NodeID, taken.Addr)
	case errors.Is(err, mesh.ErrForeignCluster):
		return fmt.Errorf("check --join %s: these peers belong to another raft cluster than this gateway's state dir (cluster %s); "+
			"join gateways of its own cluster, or start it with an empty --state-dir to join theirs", strings.Join(addrs, ","), c.node.ClusterID())
	}
	return nil
}

// joinHint is what a failed join's retry line adds when the error tells what --join got wrong.
func joinHint(err error) string {
	const meshPort = "check --join: it takes a gateway's mesh address (its --mesh-port), not its HTTP port"
	switch {
	case errors.Is(err, mesh.ErrNotMesh):
		return " (" + meshPort + ")"
	case errors.Is(err, mesh.ErrPlaintext):
		return " (" + meshPort + "; or that gateway's gossip is not encrypted with this one's key)"
	}
	return ""
}

// fail hands err to Run, which stops the gateway with it; the first one counts.
func (c *cluster) fail(err error) {
	c.log.Error("this gateway cannot join the mesh; stopping", "err", err)
	select {
	case c.fatal <- err:
	default:
	}
}

// member is the mesh's member id, if it lists one.
func (c *cluster) member(id string) (mesh.Member, bool) {
	for _, m := range c.mesh.Members() {
		if m.ID == id {
			return m, true
		}
	}
	return mesh.Member{}, false
}

// metaLoop gossips the applied index, the cluster id, the owned-worker count and the rejoining
// flag when they change (mesh.ProgressPublisher), the end of rejoining at once.
func (c *cluster) metaLoop(p *pool.Pool) {
	mesh.ProgressPublisher{
		Mesh: c.mesh,
		Progress: func() mesh.Progress {
			return mesh.Progress{AppliedIndex: c.node.AppliedIndex(), ClusterID: c.node.ClusterID(), OwnedWorkers: ownedCount(p),
				Rejoining: c.node.Rejoining()}
		},
		Urgent: c.rejoined,
		Logger: c.log,
	}.Run(c.ctx)
}

// ownedCount is how many workers of the pool this node owns.
func ownedCount(p *pool.Pool) uint32 {
	var n uint32
	for _, w := range p.Snapshot().All {
		if w.Origin == pool.OriginLocal {
			n++
		}
	}
	return n
}
