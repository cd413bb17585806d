package consensus

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/mesh"
)

// DefaultBootstrapPoll is how often ExpectBootstrap looks again without a signal.
const DefaultBootstrapPoll = time.Second

// MemberList is the mesh's member list as ExpectBootstrap reads it; *mesh.Mesh
// implements it.
type MemberList interface {
	// Members returns every member the mesh knows, this node included.
	Members() []mesh.Member
	// Watch returns a channel that receives, coalesced, after membership changes, and a
	// function that stops the watch.
	Watch() (<-chan struct{}, func())
}

// BootstrapNode is what ExpectBootstrap needs of the raft node; *Node implements it.
type BootstrapNode interface {
	HasState() bool
	BootstrapWith(servers []raft.Server) error
	// Rejoined ends the node's rejoining (Node.Rejoined): the peers it bootstraps with are all
	// new, so none ever acknowledged an entry, and each must grant the proposer its vote.
	Rejoined(why string) error
}

// ExpectBootstrap is --bootstrap-expect n: once the mesh shows n alive peers without a cluster
// id (this node included), the one of lowest id bootstraps them all as voters (BootstrapWith);
// the others wait for it to reach them as their leader. The zero value of every optional field
// is its default.
type ExpectBootstrap struct {
	// Expect is --bootstrap-expect, the number of peers to bootstrap together. Required.
	Expect int
	// Self is this node's id. Required.
	Self string
	// Node is the raft node that bootstraps. Required.
	Node BootstrapNode
	// Members is the mesh. Required.
	Members MemberList
	// Poll backs up the mesh's signals. Zero means DefaultBootstrapPoll.
	Poll time.Duration
	// After is the clock's timer. Nil means time.After.
	After func(time.Duration) <-chan time.Time
	// Logger receives a line when the expected peers see each other and when it is done. Nil
	// means slog.Default().
	Logger *slog.Logger
}

// Run waits for the expected peers and bootstraps them when this node is the lowest id. It
// returns once the node has raft state (bootstrapped here, or reached by the proposer as its
// leader) or ctx ends.
func (b ExpectBootstrap) Run(ctx context.Context) {
	log := cmp.Or(b.Logger, slog.Default())
	signals, stopWatch := b.Members.Watch()
	defer stopWatch()
	waitingFor := ""
	for !b.Node.HasState() {
		peers := expectPeers(b.Members.Members())
		if len(peers) >= b.Expect {
			if err := b.Node.Rejoined("the --bootstrap-expect peers are all new"); err != nil {
				log.Warn("cannot end rejoining before the bootstrap; retrying", "err", err)
				peers = nil
			}
		}
		switch {
		case len(peers) < b.Expect:
		case peers[0].ID == b.Self:
			err := b.Node.BootstrapWith(bootstrapServers(peers))
			if err == nil || errors.Is(err, ErrHasState) {
				return
			}
			log.Warn("bootstrapping with the expected peers failed; retrying", "err", err)
		case waitingFor != peers[0].ID:
			waitingFor = peers[0].ID
			log.Info("the expected peers see each other; waiting for the lowest node id to bootstrap",
				"proposer", waitingFor, "peers", len(peers))
		}
		select {
		case <-ctx.Done():
			return
		case <-signals:
		case <-after(b.After, cmp.Or(b.Poll, DefaultBootstrapPoll)):
		}
	}
	log.Info("raft state arrived; --bootstrap-expect is done")
}

// expectPeers are the members a --bootstrap-expect bootstrap counts: alive, without a cluster
// id yet, publishing a raft address and not leaving; sorted by id, so the proposer is first.
func expectPeers(members []mesh.Member) []mesh.Member {
	var out []mesh.Member
	for _, m := range members {
		if m.Status == mesh.StatusAlive && m.Meta.ClusterID == "" && m.Meta.RaftAddr != "" && !m.Meta.Leaving {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b mesh.Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// bootstrapServers are peers as the voters of a new configuration.
func bootstrapServers(peers []mesh.Member) []raft.Server {
	servers := make([]raft.Server, len(peers))
	for i, p := range peers {
		servers[i] = raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Meta.RaftAddr), Suffrage: raft.Voter}
	}
	return servers
}

// after is f's timer for d, time.After's when f is nil.
func after(f func(time.Duration) <-chan time.Time, d time.Duration) <-chan time.Time {
	if f == nil {
		return time.After(d)
	}
	return f(d)
}
