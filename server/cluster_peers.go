package server

import (
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/gateway/admin"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/ownership"
)

// membership adapts the mesh's members to the voter reconciler's view of the peers. It is
// built once the mesh started, which starts after raft (its metadata carries raft's address);
// the leader's duties that read it are given to the leader loop then (cluster.duties).
type membership struct {
	mesh *mesh.Mesh
	// node gives the drain marks of the applied state.
	node *consensus.Node
}

// Peers implements voters.Membership: every member but foreign ones, this node included,
// with the drain marks of the applied state.
func (a *membership) Peers() []voters.Peer {
	return raftPeers(a.mesh.Members(), a.marks())
}

// marks returns the ids of the peers marked draining.
func (a *membership) marks() map[string]bool {
	out := make(map[string]bool)
	for _, d := range a.node.Draining() {
		out[d.ID] = true
	}
	return out
}

// raftPeers are members as the voter reconciler reads them, foreign ones left out; draining
// names the peers marked draining. A peer marked draining that the mesh does not list is
// listed with mesh.StatusUnknown, so that the leader removes it from the configuration
// (voters rule 4): a drained gateway whose leave this mesh never heard (a leader that
// joined since, or one that forgot it) is gone. The other servers of the configuration that
// the mesh does not list are the reconciler's to add, as unknown since its term first found
// them missing (voters rules 6 and 12).
func raftPeers(members []mesh.Member, draining map[string]bool) []voters.Peer {
	out := make([]voters.Peer, 0, len(members))
	listed := make(map[string]bool, len(members))
	for _, mb := range members {
		listed[mb.ID] = true
		if mb.Status != mesh.StatusForeign {
			out = append(out, voters.Peer{ID: mb.ID, RaftAddress: mb.Meta.RaftAddr, Region: mb.Meta.Region, Status: mb.Status, Since: mb.Since,
				Incarnation: mb.Meta.Incarnation, Rejoining: mb.Meta.Rejoining, Draining: draining[mb.ID]})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(draining)) {
		if draining[id] && !listed[id] {
			out = append(out, voters.Peer{ID: id, Status: mesh.StatusUnknown, Draining: true})
		}
	}
	return out
}

// Watch implements voters.Membership with the mesh's coalesced signal of membership
// changes (not of peers' progress, which moves at every raft write), and a signal when the
// drain marks of the applied state change.
func (a *membership) Watch() (<-chan struct{}, func()) {
	members, stopMembers := a.mesh.WatchMembership()
	changes, stopChanges := a.node.Watch()
	out, done := make(chan struct{}, 1), make(chan struct{})
	signal := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	go func() {
		last := a.marks()
		for {
			select {
			case <-done:
				return
			case <-members:
				signal()
			case <-changes:
				if now := a.marks(); !maps.Equal(now, last) {
					last = now
					signal()
				}
			}
		}
	}()
	var once sync.Once
	return out, func() { once.Do(func() { close(done); stopMembers(); stopChanges() }) }
}

// owners adapts the mesh's members to the failover reconciler's view of the peers, sharing the
// mesh of a membership.
type owners struct{ *membership }

// Peers implements ownership.Membership: every member but foreign ones, this node included.
func (a owners) Peers() []ownership.Peer {
	return ownerPeers(a.mesh.Members())
}

// ownerPeers are members as failover reads them, foreign ones left out.
func ownerPeers(members []mesh.Member) []ownership.Peer {
	out := make([]ownership.Peer, 0, len(members))
	for _, mb := range members {
		if mb.Status != mesh.StatusForeign {
			out = append(out, ownership.Peer{ID: mb.ID, Region: mb.Meta.Region, Status: mb.Status, Since: mb.Since, Started: mb.Meta.Started})
		}
	}
	return out
}

// Peers implements admin.Peers for GET /mesh/peers and /status: the mesh's members with their
// metadata and their place in the raft configuration as this node sees it.
func (c *cluster) Peers() []admin.Peer {
	roles := make(map[string]string)
	if info, err := c.node.Info(); err == nil {
		for _, s := range info.Servers {
			roles[s.ID] = s.Suffrage
		}
		if info.Leader != "" {
			roles[info.Leader] = "leader"
		}
	}
	draining := make(map[string]bool)
	for _, d := range c.node.Draining() {
		draining[d.ID] = true
	}
	out := peerRows(c.mesh.Members(), roles, draining, ownedCounts(c.node.WorkersShared()))
	for i := range out {
		if out[i].ID == c.nodeID {
			out[i].Self = true
			if silence, cut := c.node.LeaderSilence(); cut {
				out[i].CutOff, out[i].LeaderSilenceSecs = true, math.Round(silence.Seconds()*10)/10
			}
		}
	}
	return out
}

// peerRows are the members as GET /mesh/peers lists them, with their raft roles, drain marks
// and the workers each owns in the raft records. The count is raft's, not the one a member last
// published in its metadata: a gateway that died or left stops publishing, and its workers move
// to others, so its own figure would stay behind (the peers' OWNED column added up to more
// workers than the fleet has).
func peerRows(members []mesh.Member, roles map[string]string, draining map[string]bool, owned map[string]int) []admin.Peer {
	out := make([]admin.Peer, 0, len(members))
	for _, m := range members {
		out = append(out, admin.Peer{
			ID:           m.ID,
			Address:      m.Address,
			Status:       m.Status.String(),
			Raft:         roles[m.ID],
			Region:       m.Meta.Region,
			Color:        m.Meta.Color,
			Version:      m.Meta.Version,
			Owned:        owned[m.ID],
			AppliedIndex: m.Meta.AppliedIndex,
			Incarnation:  m.Meta.Incarnation,
			Rejoining:    m.Meta.Rejoining,
			Started:      timePtr(m.Meta.Started),
			Draining:     draining[m.ID],
		})
	}
	return out
}

// ownedCounts counts the records by owner.
func ownedCounts(records []fsm.Record) map[string]int {
	owned := make(map[string]int)
	for _, r := range records {
		owned[r.Owner]++
	}
	return owned
}

// timePtr is t for an optional JSON field: nil when zero.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Info implements admin.RaftInfo for GET /mesh/raft and /status: the node's view of raft with
// the voters the leader works towards (--raft-voters, or the count it chooses by the fleet's
// size), so that both say when the cluster is not yet fault-tolerant (voters 1 of 3). The count
// is the leader's planner's own (voters.Shown) on this gateway's view of the configuration and
// the mesh, so a gateway that left or drained counts for --dead-voter-grace-secs here as it
// does for the leader's decisions, and a server of the configuration that the mesh does not
// list counts until the leader removed it (rule 15), with or without the leader's clock of it.
func (c *cluster) Info() (consensus.Info, error) {
	info, err := c.node.Info()
	if err != nil {
		return info, err
	}
	cfg := raft.Configuration{Servers: make([]raft.Server, 0, len(info.Servers))}
	for _, s := range info.Servers {
		suffrage := raft.Nonvoter
		if s.Suffrage == "voter" {
			suffrage = raft.Voter
		}
		cfg.Servers = append(cfg.Servers, raft.Server{ID: raft.ServerID(s.ID), Address: raft.ServerAddress(s.Address), Suffrage: suffrage})
	}
	info.VotersWanted, info.VotersAuto = voters.Shown(cfg, c.members.Peers(), time.Now(), voters.Options{
		Voters: c.cfg.Cluster.Voters, DeadVoterGrace: c.cfg.Cluster.DeadVoterGrace, Self: info.Leader})
	return info, nil
}
