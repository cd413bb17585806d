// Package voterstest is for tests of the voter reconciler (consensus/voters) and of the raft
// nodes it runs on (consensus): builders of raft configurations and peers, and a Membership
// whose peers a test sets.
package voterstest

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/testkit"
)

// Now is the time the tests plan at; Peer's ago counts back from it.
var Now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Voter is the voter id at address "a-"+id.
func Voter(id string) raft.Server {
	return raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress("a-" + id), Suffrage: raft.Voter}
}

// Nonvoter is the non-voter id at address "a-"+id.
func Nonvoter(id string) raft.Server {
	return raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress("a-" + id), Suffrage: raft.Nonvoter}
}

// Conf is the configuration of servers.
func Conf(servers ...raft.Server) raft.Configuration { return raft.Configuration{Servers: servers} }

// Peer is id in region with status since ago before Now, at address "a-"+id.
func Peer(id, region string, status mesh.Status, ago time.Duration) voters.Peer {
	return voters.Peer{ID: id, RaftAddress: "a-" + id, Region: region, Status: status, Since: Now.Add(-ago)}
}

// Alive is id in region, alive for a minute.
func Alive(id, region string) voters.Peer { return Peer(id, region, mesh.StatusAlive, time.Minute) }

// Draining is p drained by an operator.
func Draining(p voters.Peer) voters.Peer { p.Draining = true; return p }

// Membership is a voters.Membership whose peers a test sets. Its signals never block.
type Membership = testkit.Members[voters.Peer]

// NewMembership is a membership of peers.
func NewMembership(peers ...voters.Peer) *Membership {
	return testkit.NewMembers(func(p voters.Peer) string { return p.ID }, peers...)
}
