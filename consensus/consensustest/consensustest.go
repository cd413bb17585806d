// Package consensustest starts clusters of consensus.Node on raft's in-memory transport, each
// node optionally serving gRPC on 127.0.0.1, for the tests of the packages built on consensus
// (consensus/fleetack, consensus/forward) and consensus's external tests.
//
// Package consensus's own tests cannot import it (it imports consensus); they keep their
// helpers, which reach the node's internals.
package consensustest

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// Cluster is nodes on raft's in-memory transport, bootstrapped together as voters.
type Cluster struct {
	Nodes []*consensus.Node
	Trans []*raft.InmemTransport
	// Addrs are the gRPC addresses by node id, and Servers the gRPC servers by node, once
	// Serve made them.
	Addrs   map[string]string
	Servers []*grpc.Server
}

// Start starts size voters n1..nK, ephemeral, each with its own metrics registry and raft
// tuned by ClusterRaft; each tune, if any, then adjusts a node's configuration.
func Start(t testing.TB, size int, tune ...func(i int, c *consensus.Config)) *Cluster {
	t.Helper()
	c := &Cluster{}
	var servers []raft.Server
	for i := range size {
		addr, trans := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("mem-n%d", i+1)))
		c.Trans = append(c.Trans, trans)
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i+1)), Address: addr, Suffrage: raft.Voter})
	}
	c.Heal()
	for i, s := range servers {
		cfg := consensus.Config{NodeID: string(s.ID), Ephemeral: true, Transport: c.Trans[i],
			Registerer: prometheus.NewRegistry(), BootstrapServers: servers, Tune: ClusterRaft}
		for _, f := range tune {
			f(i, &cfg)
		}
		c.Nodes = append(c.Nodes, StartNode(t, cfg))
	}
	return c
}

// StartNode starts a node, quiet and on testkit.FastRaft unless cfg says otherwise, and shuts
// it down when the test ends.
func StartNode(t testing.TB, cfg consensus.Config) *consensus.Node {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testkit.Quiet()
	}
	if cfg.Tune == nil {
		cfg.Tune = testkit.FastRaft
	}
	n, err := consensus.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	return n
}

// ClusterRaft gives the leader a lease long enough (300 ms) that a test can write to an
// isolated leader before it notices it is cut off.
func ClusterRaft(c *raft.Config) {
	testkit.FastRaft(c)
	c.HeartbeatTimeout = 300 * time.Millisecond
	c.ElectionTimeout = 300 * time.Millisecond
	c.LeaderLeaseTimeout = 300 * time.Millisecond
}

// SlowCommitRaft is ClusterRaft with raft telling followers a commit only with the next entry
// or after 2 to 4 s (CommitTimeout): a follower that applies a write sooner learned it from the
// leader's commit notice.
func SlowCommitRaft(c *raft.Config) {
	ClusterRaft(c)
	c.CommitTimeout = 2 * time.Second
}

// Heal connects every transport to every other.
func (c *Cluster) Heal() {
	for _, a := range c.Trans {
		for _, b := range c.Trans {
			if a != b {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
}

// Isolate cuts node i off from the others, both ways.
func (c *Cluster) Isolate(i int) {
	c.Trans[i].DisconnectAll()
	for j, t := range c.Trans {
		if j != i {
			t.Disconnect(c.Trans[i].LocalAddr())
		}
	}
}

// Leader returns the index of the single node that leads and that every node in among agrees
// on, or -1.
func (c *Cluster) Leader(among ...int) int {
	lead := -1
	for _, i := range among {
		if c.Nodes[i].IsLeader() {
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
		if id, _ := c.Nodes[i].Leader(); id != c.Nodes[lead].ID() {
			return -1
		}
	}
	return lead
}

// WaitLeader waits until the nodes in among agree on one leader, and returns its index.
func (c *Cluster) WaitLeader(t testing.TB, among ...int) int {
	t.Helper()
	lead := -1
	testkit.For(t, "one leader all agree on", func() bool { lead = c.Leader(among...); return lead >= 0 })
	return lead
}

// Serve serves gRPC on 127.0.0.1 for each node, and stops it when the test ends. It opens every
// listener and sets Addrs first; then, node by node, it makes the server with the options opts
// gives (nil: none), has register add the services (which may resolve peers through
// ResolveRPC already), and serves. A service's own cleanup registered in register runs before
// its server stops.
func (c *Cluster) Serve(t testing.TB, opts func(i int) []grpc.ServerOption, register func(i int, s *grpc.Server)) {
	t.Helper()
	lns := make([]net.Listener, len(c.Nodes))
	addrs := make(map[string]string, len(c.Nodes))
	for i, n := range c.Nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		lns[i], addrs[n.ID()] = ln, ln.Addr().String()
	}
	c.Addrs = addrs
	for i := range c.Nodes {
		var o []grpc.ServerOption
		if opts != nil {
			o = opts(i)
		}
		s := grpc.NewServer(o...)
		c.Servers = append(c.Servers, s)
		served := make(chan struct{})
		serving := false
		t.Cleanup(func() {
			s.Stop()
			if serving {
				<-served
			}
		})
		register(i, s)
		serving = true
		go func() { defer close(served); _ = s.Serve(lns[i]) }()
	}
}

// ResolveRPC returns the address Serve serves node id's gRPC on.
func (c *Cluster) ResolveRPC(id string) (string, bool) {
	a, ok := c.Addrs[id]
	return a, ok
}

// Others returns the indexes below size other than not.
func Others(size, not int) []int {
	var out []int
	for i := range size {
		if i != not {
			out = append(out, i)
		}
	}
	return out
}

// WaitReady waits until n leads with a cluster id.
func WaitReady(t testing.TB, n *consensus.Node) {
	t.Helper()
	testkit.For(t, n.ID()+" to lead with a cluster id", func() bool { return n.IsLeader() && n.ClusterID() != "" })
}

// WaitApplied waits until every node applied index.
func WaitApplied(t testing.TB, nodes []*consensus.Node, index uint64) {
	t.Helper()
	for _, n := range nodes {
		testkit.For(t, fmt.Sprintf("%s to apply index %d", n.ID(), index), func() bool { return n.AppliedIndex() >= index })
	}
}

// Spec returns the normalized spec of an HTTP worker on port.
func Spec(t testing.TB, port int) worker.Spec {
	t.Helper()
	s := worker.Spec{URL: fmt.Sprintf("http://127.0.0.1:%d", port), APIKey: "sk-secret"}
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	return s
}
