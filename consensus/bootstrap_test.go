package consensus

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/consensus/voters/voterstest"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/test/testkit"
)

// startWaiting starts size nodes on raft's in-memory transport, each configured by with (Join or
// BootstrapExpect), none bootstrapped.
func startWaiting(t *testing.T, size int, with func(i int, c *Config)) *cluster {
	t.Helper()
	c := &cluster{byAddr: make(map[raft.ServerAddress]*raft.InmemTransport)}
	for i := range size {
		addr, trans := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("mem-n%d", i+1)))
		c.trans = append(c.trans, trans)
		c.byAddr[addr] = trans
	}
	c.heal()
	for i := range size {
		cfg := Config{NodeID: fmt.Sprintf("n%d", i+1), Ephemeral: true, Transport: c.trans[i],
			Registerer: prometheus.NewRegistry(), Tune: clusterRaft}
		with(i, &cfg)
		c.nodes = append(c.nodes, startNode(t, cfg))
	}
	return c
}

func TestBootstrapExpect(t *testing.T) {
	var logs logBuffer
	c := startWaiting(t, 3, func(i int, cfg *Config) {
		cfg.BootstrapExpect = 3
		cfg.Logger = logs.Logger(slog.LevelInfo)
	})
	for _, n := range c.nodes {
		if n.HasState() || n.bootstrapped {
			t.Fatalf("%s has state before BootstrapWith", n.ID())
		}
		if !n.Rejoining() {
			t.Fatalf("%s waits for its peers without state but is not rejoining", n.ID())
		}
		// ExpectBootstrap ends rejoining once the expected peers are all new.
		if err := n.Rejoined("test"); err != nil {
			t.Fatal(err)
		}
	}
	if got := logs.Lines("waiting for --bootstrap-expect"); len(got) != 3 {
		t.Fatalf("%d waiting lines, want 3:\n%s", len(got), logs.String())
	}
	var servers []raft.Server
	for i := 2; i >= 0; i-- { // out of order: BootstrapWith sorts
		servers = append(servers, raft.Server{ID: raft.ServerID(c.nodes[i].ID()), Address: raft.ServerAddress(c.nodes[i].Address())})
	}
	if err := c.nodes[1].BootstrapWith(servers[:1]); err == nil {
		t.Fatal("BootstrapWith accepted servers without this node")
	}
	// The lowest id proposes; the others get the configuration from it as their leader.
	if err := c.nodes[0].BootstrapWith(servers); err != nil {
		t.Fatal(err)
	}
	leader := c.nodes[c.waitLeader(t, 0, 1, 2)]
	testkit.For(t, "a cluster id", func() bool { return leader.ClusterID() != "" })
	waitServers(t, leader, "n1:voter", "n2:voter", "n3:voter")
	res, err := leader.Apply(t.Context(), fsm.Register{Spec: spec(t, 8201), Owner: leader.ID()})
	if err != nil {
		t.Fatal(err)
	}
	waitApplied(t, c.nodes, res.Index)
	for _, n := range c.nodes {
		if !n.HasState() || n.ClusterID() != leader.ClusterID() {
			t.Fatalf("%s: state %v, cluster id %q, want %q", n.ID(), n.HasState(), n.ClusterID(), leader.ClusterID())
		}
		if err := n.BootstrapWith(servers); !errors.Is(err, ErrHasState) {
			t.Fatalf("%s: BootstrapWith on a node with state = %v, want ErrHasState", n.ID(), err)
		}
	}
}

// TestJoinWaitsForLeader: a node started with Join and no state does not bootstrap, never leads
// alone, and has state once a leader adds it.
func TestJoinWaitsForLeader(t *testing.T) {
	m := voterstest.NewMembership(
		voters.Peer{ID: "n1", RaftAddress: "mem-n1", Status: mesh.StatusAlive},
		voters.Peer{ID: "n2", RaftAddress: "mem-n2", Status: mesh.StatusAlive},
	)
	// --raft-voters 3, so that the joined gateway is promoted: two gateways keep one voter by
	// default.
	r := newLateVoters(voters.Config{Membership: m, Voters: 3, Logger: testkit.Quiet()})
	c := startWaiting(t, 2, func(i int, cfg *Config) {
		if i == 0 {
			cfg.LeaderLoop = r.loop.Run
			return
		}
		cfg.Join = []string{"127.0.0.1:39527"}
	})
	if !c.nodes[0].bootstrapped || c.nodes[1].bootstrapped {
		t.Fatalf("bootstrapped: n1 %v (want true), n2 %v (want false)", c.nodes[0].bootstrapped, c.nodes[1].bootstrapped)
	}
	r.bind(t, c.nodes[0])
	waitReady(t, c.nodes[0])
	waitServers(t, c.nodes[0], "n1:voter", "n2:voter")
	testkit.For(t, "n2 to have state and the cluster id", func() bool {
		return c.nodes[1].HasState() && c.nodes[1].ClusterID() == c.nodes[0].ClusterID()
	})
	if c.nodes[1].IsLeader() {
		t.Fatal("the joining node leads")
	}
}

// TestRestartIgnoresJoin: with raft state, Join and BootstrapExpect neither bootstrap nor wait:
// the node restores its configuration and leads its cluster of one again.
func TestRestartIgnoresJoin(t *testing.T) {
	dir, err := storage.PrepareNodeDir(t.TempDir(), "n1", testkit.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeID: "n1", BindAddr: "127.0.0.1:0", StateDir: dir.Path}
	n := startNode(t, cfg)
	waitReady(t, n)
	id := n.ClusterID()
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	cfg.Join, cfg.BootstrapExpect, cfg.Logger = []string{"127.0.0.1:1"}, 3, logs.Logger(slog.LevelInfo)
	n = startNode(t, cfg)
	waitReady(t, n)
	if n.bootstrapped || n.ClusterID() != id {
		t.Fatalf("restart: bootstrapped %v, cluster id %q (want %q)", n.bootstrapped, n.ClusterID(), id)
	}
	if len(logs.Lines("raft state found")) != 1 {
		t.Fatalf("no INFO line saying the flags are ignored:\n%s", logs.String())
	}
}
