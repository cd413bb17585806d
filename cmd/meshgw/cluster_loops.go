package main

import (
	"errors"
	"strings"
	"time"

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

// metaLoop gossips the applied index, the cluster id and the owned-worker count when they
// change (mesh.ProgressPublisher).
func (c *cluster) metaLoop(p *pool.Pool) {
	mesh.ProgressPublisher{
		Mesh: c.mesh,
		Progress: func() mesh.Progress {
			return mesh.Progress{AppliedIndex: c.node.AppliedIndex(), ClusterID: c.node.ClusterID(), OwnedWorkers: ownedCount(p)}
		},
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

// importLoop gives imported workers (owned by another gateway) their health until the owner's
// bulletins carry it (step 7): ready while the owner is alive in the mesh; kept as it is while
// the owner is dead (fail-static: the worker may well still serve); pending while the owner is
// unknown to the mesh or left it. See docs/choices.md.
func (c *cluster) importLoop(p *pool.Pool) {
	signals, stopWatch := c.mesh.Watch()
	defer stopWatch()
	records, stopRecords := c.node.Watch()
	defer stopRecords()
	tick := time.NewTicker(clusterPoll) // the pool follows raft's signal a little later
	defer tick.Stop()
	for {
		status := make(map[string]mesh.Status)
		for _, m := range c.mesh.Members() {
			status[m.ID] = m.Status
		}
		for _, w := range p.Snapshot().All {
			if w.Origin != pool.OriginMesh {
				continue
			}
			h, ok := importedHealth(status, w.Owner())
			if !ok || w.Health() == h {
				continue
			}
			if changed, _ := p.SetHealth(w.ID, h); changed {
				c.log.Info("imported worker health follows its owner", "worker", w.URL, "owner", w.Owner(), "health", h)
			}
		}
		select {
		case <-c.stop:
			return
		case <-signals:
		case <-records:
		case <-tick.C:
		}
	}
}

// importedHealth is the health an imported worker takes from its owner's mesh status, and false
// when it keeps the one it has.
func importedHealth(status map[string]mesh.Status, owner string) (pool.Health, bool) {
	s, known := status[owner]
	switch {
	case !known, s == mesh.StatusLeft, s == mesh.StatusForeign:
		return pool.HealthPending, true
	case s == mesh.StatusAlive:
		return pool.HealthReady, true
	}
	return 0, false // dead or suspect: fail-static
}
