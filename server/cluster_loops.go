package server

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

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
		if why := c.cannotJoin(addrs, err, false); why != nil {
			c.fail(why)
			return
		}
		if n > 0 {
			c.log.Info("joined the mesh", "reached", n, "of", len(addrs), "alive", c.mesh.Count(mesh.StatusAlive))
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
// again may succeed (or the join stands); joined is whether this gateway joined the mesh before:
//   - another live gateway uses this node id, and this one is the one that stops (idTaken);
//   - every address is a gateway of another raft cluster: this gateway's cluster id comes from
//     its state directory and theirs from theirs, and neither ever changes
//     (mesh.ErrForeignCluster). Some addresses that did not answer leave it to a retry: they may
//     be this gateway's own peers, not up yet.
func (c *cluster) cannotJoin(addrs []string, err error, joined bool) error {
	var taken *mesh.NodeIDTakenError
	switch {
	case errors.As(err, &taken):
		return c.idTaken(taken, joined)
	case errors.Is(err, mesh.ErrForeignCluster):
		return fmt.Errorf("check --join %s: these peers belong to another raft cluster than this gateway's state dir (cluster %s); "+
			"join gateways of its own cluster, or start it with an empty --state-dir to join theirs", strings.Join(addrs, ","), c.node.ClusterID())
	}
	return nil
}

// idTaken decides a join that found this gateway's node id listed at another address where a
// live process answers: the error that stops this gateway, or nil when it goes on, joined, and
// logs why:
//   - the address reaches this gateway's own mesh socket: it answered its own ping there (bound
//     to every interface of a host that still has the address its previous run advertised);
//   - the other gateway is the one that stops (yields).
func (c *cluster) idTaken(taken *mesh.NodeIDTakenError, joined bool) error {
	switch {
	case taken.ReachesBind(c.meshBind()):
		c.log.Warn("peers list this gateway's node id at another address of this host, where this gateway answers itself "+
			"(its mesh is bound to every interface, or to that address): not another gateway. Peers that reach that address keep "+
			"listing this gateway there, with its previous run's metadata, for as long as it answers there; to end it, bind the mesh "+
			"to the advertised host only (--mesh-bind-host), or remove that address from this host",
			"node_id", taken.NodeID, "listed_at", taken.Addr, "advertised", c.mesh.Addr(), "bind", c.meshBind())
		return nil
	case !yields(taken, c.startTime, c.mesh.Addr(), joined):
		c.log.Warn("a gateway started after this one uses its node id; that one stops, this one goes on",
			"node_id", taken.NodeID, "other", taken.Addr, "other_started", taken.Started, "started", c.startTime)
		return nil
	}
	return fmt.Errorf("--node-id %s is already used by a live gateway at %s; give each gateway its own node id", taken.NodeID, taken.Addr)
}

// yields reports whether this gateway, started at started and advertised at self, is the one
// of two live gateways with one node id that stops: the one started later. Both compare the
// same two start times, so exactly one stops (of two started at the same instant, the one of
// the greater mesh address); with clocks further apart than the two starts, it may be the one
// that started first. Without the other's start time (a build that does not publish it), this
// gateway stops unless it joined the mesh before (joined).
func yields(other *mesh.NodeIDTakenError, started time.Time, self string, joined bool) bool {
	switch {
	case other.Started.IsZero():
		return !joined
	case started.Equal(other.Started):
		return self > other.Addr
	}
	return started.After(other.Started)
}

// meshBind is where the mesh's sockets are bound: --mesh-bind-host (mesh.Listen's default when
// empty) at the port the mesh advertises, which is the one it bound (startMesh sets no other).
func (c *cluster) meshBind() string {
	_, port, _ := net.SplitHostPort(c.mesh.Addr())
	return net.JoinHostPort(cmp.Or(c.cfg.Cluster.MeshBind, mesh.DefaultBindAddr), port)
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
