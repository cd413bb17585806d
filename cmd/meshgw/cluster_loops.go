package main

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus"
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

// bootstrapLoop is --bootstrap-expect n: once the mesh shows n alive peers without a cluster
// id (this node included), the one of lowest id bootstraps them all as voters (BootstrapWith);
// the others wait for it to reach them as their leader. It ends once this node has raft state.
func (c *cluster) bootstrapLoop(n int) {
	signals, stopWatch := c.mesh.Watch()
	defer stopWatch()
	tick := time.NewTicker(clusterPoll)
	defer tick.Stop()
	waitingFor := ""
	for !c.node.HasState() {
		peers := bootstrapPeers(c.mesh.Members())
		switch {
		case len(peers) < n:
		case peers[0].ID == c.nodeID:
			servers := make([]raft.Server, len(peers))
			for i, p := range peers {
				servers[i] = raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Meta.RaftAddr), Suffrage: raft.Voter}
			}
			err := c.node.BootstrapWith(servers)
			if err == nil || errors.Is(err, consensus.ErrHasState) {
				return
			}
			c.log.Warn("bootstrapping with the expected peers failed; retrying", "err", err)
		case waitingFor != peers[0].ID:
			waitingFor = peers[0].ID
			c.log.Info("the expected peers see each other; waiting for the lowest node id to bootstrap", "proposer", waitingFor, "peers", len(peers))
		}
		select {
		case <-c.stop:
			return
		case <-signals:
		case <-tick.C:
		}
	}
	c.log.Info("raft state arrived; --bootstrap-expect is done")
}

// bootstrapPeers are the alive members that have no cluster id yet and publish a raft
// address, sorted by id.
func bootstrapPeers(members []mesh.Member) []mesh.Member {
	var out []mesh.Member
	for _, m := range members {
		if m.Status == mesh.StatusAlive && m.Meta.ClusterID == "" && m.Meta.RaftAddr != "" && !m.Meta.Leaving {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b mesh.Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// caughtUpLoop closes caughtUp on a follower once it has applied what the leader had when this
// node first heard from it: the commit index raft then knew and the applied index the leader
// published in its mesh metadata (the leader's own path is the leader loop). Until then the
// reconciler keeps the state raft restored (fail-static).
func (c *cluster) caughtUpLoop() {
	nodeSignals, stopNode := c.node.Watch()
	defer stopNode()
	meshSignals, stopMesh := c.mesh.Watch()
	defer stopMesh()
	tick := time.NewTicker(metaEvery)
	defer tick.Stop()
	var commit, published uint64
	leader := ""
	for {
		if info, err := c.node.Info(); err == nil && info.Leader != "" && info.Leader != c.nodeID {
			if m, ok := c.member(info.Leader); leader == "" && ok && m.Status == mesh.StatusAlive {
				leader, published = info.Leader, m.Meta.AppliedIndex
				commit, _ = c.node.Progress()
				c.log.Info("following the raft leader; catching up", "leader", leader, "commit_index", commit,
					"leader_applied_index", published, "applied_index", c.node.AppliedIndex())
			}
			if _, applied := c.node.Progress(); leader != "" && applied >= commit && c.node.AppliedIndex() >= published {
				c.markCaughtUp("applied what the leader " + leader + " had committed")
				return
			}
		}
		select {
		case <-c.stop:
			return
		case <-c.caughtUp:
			return
		case <-nodeSignals:
		case <-meshSignals:
		case <-tick.C:
		}
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
// change, at most every metaEvery.
func (c *cluster) metaLoop(p *pool.Pool) {
	signals, stopWatch := c.node.Watch()
	defer stopWatch()
	tick := time.NewTicker(metaEvery)
	defer tick.Stop()
	var last time.Time
	for {
		if wait := metaEvery - time.Since(last); wait > 0 && !c.wait(wait) {
			return
		}
		last = time.Now()
		cur := c.mesh.Local()
		applied, id, owned := c.node.AppliedIndex(), c.node.ClusterID(), ownedCount(p)
		if cur.AppliedIndex != applied || cur.ClusterID != id || cur.OwnedWorkers != owned {
			err := c.mesh.SetMeta(func(m *mesh.Meta) { m.AppliedIndex, m.ClusterID, m.OwnedWorkers = applied, id, owned })
			if err != nil && !errors.Is(err, mesh.ErrLeft) && !errors.Is(err, mesh.ErrShutdown) {
				c.log.Warn("gossiping this node's metadata failed", "err", err)
			}
		}
		select {
		case <-c.stop:
			return
		case <-signals:
		case <-tick.C: // the owned count follows the pool, which raft's signal may precede
		}
	}
}

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
