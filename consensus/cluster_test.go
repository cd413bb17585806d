package consensus

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/test/testkit"
)

// cluster is n nodes on raft's in-memory transport, bootstrapped together.
type cluster struct {
	nodes  []*Node
	trans  []*raft.InmemTransport
	byAddr map[raft.ServerAddress]*raft.InmemTransport
}

func startCluster(t *testing.T, size int) *cluster {
	t.Helper()
	return startClusterTuned(t, size, clusterRaft)
}

// startClusterTuned starts size in-memory voters whose raft configuration tune sets.
func startClusterTuned(t *testing.T, size int, tune func(*raft.Config)) *cluster {
	t.Helper()
	return startClusterWith(t, size, func(_ int, c *Config) { c.Tune = tune })
}

// startClusterWith starts size in-memory voters, ephemeral on clusterRaft, whose configuration
// with then adjusts.
func startClusterWith(t *testing.T, size int, with func(i int, c *Config)) *cluster {
	t.Helper()
	c := &cluster{byAddr: make(map[raft.ServerAddress]*raft.InmemTransport)}
	var servers []raft.Server
	for i := range size {
		addr, trans := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("mem-n%d", i+1)))
		c.trans = append(c.trans, trans)
		c.byAddr[addr] = trans
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i+1)), Address: addr, Suffrage: raft.Voter})
	}
	c.heal()
	for i, s := range servers {
		cfg := Config{
			NodeID:           string(s.ID),
			Ephemeral:        true,
			Transport:        c.trans[i],
			Registerer:       prometheus.NewRegistry(),
			BootstrapServers: servers,
			Tune:             clusterRaft,
		}
		with(i, &cfg)
		c.nodes = append(c.nodes, startNode(t, cfg))
	}
	return c
}

// clusterRaft gives the leader a lease long enough (300 ms) that a test can write to an
// isolated leader before it notices it is cut off.
func clusterRaft(c *raft.Config) {
	testkit.FastRaft(c)
	c.HeartbeatTimeout = 300 * time.Millisecond
	c.ElectionTimeout = 300 * time.Millisecond
	c.LeaderLeaseTimeout = 300 * time.Millisecond
}

// heal connects every transport to every other.
func (c *cluster) heal() {
	for _, a := range c.trans {
		for _, b := range c.trans {
			if a != b {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
}

// isolate cuts node i off from the others, both ways.
func (c *cluster) isolate(i int) {
	c.trans[i].DisconnectAll()
	for j, t := range c.trans {
		if j != i {
			t.Disconnect(c.trans[i].LocalAddr())
		}
	}
}

// leader returns the index of the single node that leads and that every node in among agrees
// on, or -1.
func (c *cluster) leader(among ...int) int {
	lead := -1
	for _, i := range among {
		if c.nodes[i].IsLeader() {
			if lead >= 0 {
				return -1
			}
			lead = i
		}
	}
	if lead < 0 {
		return -1
	}
	for _, i := range among {
		if _, id := c.nodes[i].raft.LeaderWithID(); string(id) != c.nodes[lead].ID() {
			return -1
		}
	}
	return lead
}

func (c *cluster) waitLeader(t *testing.T, among ...int) int {
	t.Helper()
	lead := -1
	testkit.For(t, "one leader all agree on", func() bool { lead = c.leader(among...); return lead >= 0 })
	return lead
}

func others(size, not int) []int {
	var out []int
	for i := range size {
		if i != not {
			out = append(out, i)
		}
	}
	return out
}

func TestCluster(t *testing.T) {
	c := startCluster(t, 3)
	all := []int{0, 1, 2}
	lead := c.waitLeader(t, all...)
	leader := c.nodes[lead]
	testkit.For(t, "the cluster id on every node", func() bool {
		for _, n := range c.nodes {
			if n.ClusterID() == "" || n.ClusterID() != leader.ClusterID() {
				return false
			}
		}
		return true
	})

	// A write on the leader is applied on all three.
	ctx := context.Background()
	a := spec(t, 8001)
	res, err := leader.Apply(ctx, fsm.Register{Spec: a, Owner: leader.ID()})
	if err != nil || res.Outcome != fsm.Created {
		t.Fatalf("register on the leader: %+v, %v", res, err)
	}
	waitApplied(t, c.nodes, res.Index)
	want := leader.Workers()
	for _, n := range c.nodes {
		if diff := cmp.Diff(want, n.Workers()); diff != "" {
			t.Fatalf("%s differs from the leader (-leader +%s):\n%s", n.ID(), n.ID(), diff)
		}
	}

	// A follower names the leader and writes nothing.
	follower := c.nodes[others(3, lead)[0]]
	before := follower.AppliedIndex()
	_, err = follower.Apply(ctx, fsm.Remove{ID: a.ID()})
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != leader.ID() || nl.LeaderAddress != leader.Address() {
		t.Fatalf("follower's Apply: %v; want *NotLeaderError naming %s", err, leader.ID())
	}
	if _, ok := follower.Worker(a.ID()); !ok || follower.AppliedIndex() != before {
		t.Fatal("a refused follower write changed the state")
	}
	info, err := follower.Info()
	if err != nil || info.Leader != leader.ID() || len(info.Servers) != 3 {
		t.Fatalf("follower's info: %+v, %v", info, err)
	}

	// Partition the leader. It goes on believing it leads until its lease runs out, so a write
	// it takes now is appended but cannot commit: the outcome is unknown.
	c.isolate(lead)
	oldLeader := leader
	_, err = oldLeader.Apply(ctx, fsm.Transfer{ID: a.ID(), To: "n9"})
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("isolated leader's Apply: %v; want ErrOutcomeUnknown", err)
	}
	// Once it knows, it refuses at once.
	testkit.For(t, "the isolated node to step down", func() bool { return !oldLeader.IsLeader() })
	if _, err = oldLeader.Apply(ctx, fsm.Transfer{ID: a.ID(), To: "n9"}); !errors.Is(err, ErrNoLeader) && !errors.As(err, &nl) {
		t.Fatalf("isolated follower's Apply: %v; want ErrNoLeader", err)
	}

	// The other two elect a new leader and keep writing.
	rest := others(3, lead)
	newLeader := c.nodes[c.waitLeader(t, rest...)]
	res, err = newLeader.Apply(ctx, fsm.SetFlags{ID: a.ID(), Flags: fsm.FlagChange{Disabled: ptr(true), By: "ops"}})
	if err != nil || res.Outcome != fsm.Updated {
		t.Fatalf("write on the new leader: %+v, %v", res, err)
	}
	waitApplied(t, []*Node{c.nodes[rest[0]], c.nodes[rest[1]]}, res.Index)
	if r, _ := oldLeader.Worker(a.ID()); r.Owner == "n9" || r.Disabled {
		t.Fatalf("the isolated node applied something: %+v", r)
	}

	// Heal: the old leader follows and catches up; its unknown write was never committed.
	c.heal()
	waitApplied(t, []*Node{oldLeader}, res.Index)
	got, _ := oldLeader.Worker(a.ID())
	if !got.Disabled || got.Owner == "n9" {
		t.Fatalf("old leader after healing: %+v", got)
	}
	c.waitLeader(t, all...)
}

func waitApplied(t *testing.T, nodes []*Node, index uint64) {
	t.Helper()
	for _, n := range nodes {
		testkit.For(t, fmt.Sprintf("%s to apply index %d", n.ID(), index), func() bool { return n.AppliedIndex() >= index })
	}
}
