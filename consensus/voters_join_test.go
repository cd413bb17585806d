package consensus

import (
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/consensus/voters/voterstest"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/testkit"
)

// joinTries is how many times TestJoinedGatewaysVoteWithinASecond starts a cluster; docs/cluster.md
// gives the figure of 20:
//
//	go test ./consensus -run TestJoinedGatewaysVoteWithinASecond -join-tries 20 -v
var joinTries = flag.Int("join-tries", 1, "clusters TestJoinedGatewaysVoteWithinASecond starts")

// joinBound is how soon after the third gateway joins the mesh the raft configuration must hold
// three voters.
const joinBound = time.Second

// TestJoinedGatewaysVoteWithinASecond starts a gateway alone (raft's default timeouts, as
// meshgw runs them) and two gateways that join it at once, as a fleet or a test harness starts
// them: three voters within joinBound of the third join, in every try, so that the first
// gateway can die without taking the quorum with it.
func TestJoinedGatewaysVoteWithinASecond(t *testing.T) {
	var took []time.Duration
	for i := range *joinTries {
		t.Run(fmt.Sprintf("try %d", i+1), func(t *testing.T) {
			took = append(took, joinThree(t))
		})
	}
	within := 0
	for _, d := range took {
		if d <= joinBound {
			within++
		}
	}
	t.Logf("%d of %d tries had three voters within %s of the third join: %v", within, len(took), joinBound, took)
	if within != len(took) {
		t.Fatalf("%d of %d tries had three voters within %s", within, len(took), joinBound)
	}
}

// joinThree starts n1 alone, then n2 and n3 joining it, and returns how long after the third
// join the leader's configuration held three voters.
func joinThree(t *testing.T) time.Duration {
	t.Helper()
	m := voterstest.NewMembership(voters.Peer{ID: "n1", RaftAddress: "mem-n1", Status: mesh.StatusAlive, Since: time.Now()})
	r := newLateVoters(voters.Config{Membership: m, Logger: testkit.Quiet()})
	c := &cluster{byAddr: make(map[raft.ServerAddress]*raft.InmemTransport)}
	for i := range 3 {
		addr, trans := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("mem-n%d", i+1)))
		c.trans = append(c.trans, trans)
		c.byAddr[addr] = trans
	}
	c.heal()
	for i := range 3 {
		cfg := Config{NodeID: fmt.Sprintf("n%d", i+1), Transport: c.trans[i], Registerer: prometheus.NewRegistry(),
			Tune: func(*raft.Config) {}} // raft's defaults: a heartbeat timeout of 1 s
		if i == 0 {
			cfg.Ephemeral, cfg.LeaderLoop = true, r.loop.Run
		} else {
			cfg.StateDir = joiningStateDir(t, cfg.NodeID)
		}
		c.nodes = append(c.nodes, startNode(t, cfg))
	}
	r.bind(t, c.nodes[0])
	if info, err := c.nodes[0].Info(); err != nil || info.Voters != 1 || info.FaultTolerant {
		t.Fatalf("alone: %+v, %v; want one voter, not fault-tolerant", info, err)
	}
	m.Set(voters.Peer{ID: "n2", RaftAddress: "mem-n2", Status: mesh.StatusAlive, Since: time.Now()})
	m.Set(voters.Peer{ID: "n3", RaftAddress: "mem-n3", Status: mesh.StatusAlive, Since: time.Now()})
	joined := time.Now()
	want := []string{"n1:voter", "n2:voter", "n3:voter"}
	testkit.For(t, "three voters", func() bool { return slices.Equal(serversOf(t, c.nodes[0]), want) })
	took := time.Since(joined)
	if info, err := c.nodes[0].Info(); err != nil || info.Voters != 3 || !info.FaultTolerant {
		t.Fatalf("three voters: %+v, %v; want fault-tolerant", info, err)
	}
	return took
}
