package server

import (
	"errors"
	"strings"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/mesh"
)

// joinLoop joins the mesh through addrs, retrying with a doubling backoff until one answers or
// the gateway stops. It never blocks the data plane; memberlist's gossip keeps the membership
// after the first success.
func (c *cluster) joinLoop(addrs []string) {
	backoff := joinBackoffMin
	for attempt := 1; ; attempt++ {
		n, err := c.mesh.Join(addrs)
		if err == nil && n > 0 {
			c.log.Info("joined the mesh", "reached", n, "of", len(addrs), "alive", c.mesh.Count(mesh.StatusAlive))
			return
		}
		lvl := "retrying"
		if errors.Is(err, mesh.ErrForeignCluster) {
			lvl = "retrying (check --join: these peers belong to another raft cluster)"
		}
		c.log.Warn("joining the mesh failed; "+lvl, "join", strings.Join(addrs, ","), "attempt", attempt, "retry_in", backoff, "err", err)
		if !c.wait(backoff) {
			return
		}
		backoff = min(2*backoff, joinBackoffMax)
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
