package consensus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/loopport"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// The tests of this file run raft's TCP transport on loopback, because what they show happens
// on a raft address that one process released and another bound (a reused pod IP): the
// in-memory transport has no such address. None of them is parallel. Each waits on conditions
// bounded by testkit.Deadline; what must not happen is watched over a count of the leader's
// attempts (holdsOver), not over a span of wall-clock time.

// heldAttempts is how many more failed heartbeats of a leader to a peer a takeover test watches
// after the first refusal, while the refused node keeps its own state (holdsOver): raft dials a
// failing peer's heartbeat again at most HeartbeatTimeout/2 later (150 ms with clusterRaft),
// so this takes about half a second on an idle machine.
const heldAttempts = 3

// rebindAttempts is how many times startAt tries to bind a released raft address.
const rebindAttempts = 3

// tcpNode is a node's configuration on raft's TCP transport on loopback (bind "" picks a free
// port), ephemeral unless with gives it a state directory.
func tcpNode(id, bind string, logger *slog.Logger, with func(*Config)) Config {
	if bind == "" {
		bind = "127.0.0.1:0"
	}
	c := Config{NodeID: id, Ephemeral: true, BindAddr: bind, Registerer: prometheus.NewRegistry(),
		Tune: clusterRaft, Logger: logger}
	if with != nil {
		with(&c)
	}
	return c
}

// releasableAddr is a raft address for a node that a test stops so that another node binds the
// address it released: a port of 127.0.0.1 below the ephemeral range (loopport), so that in
// between neither a listener on port 0 nor an outgoing connection, of this test binary or of
// another one running beside it, is given it.
func releasableAddr(t *testing.T) string {
	t.Helper()
	port, err := loopport.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// startAt starts a node from cfg, as startNode does, on cfg.BindAddr, which may be a raft
// address that a node stopped just before released (releasableAddr). A process that binds that
// port on purpose may hold it: startAt then waits up to a second for it to be free, and tries
// rebindAttempts times in all before it skips the test, naming the address, since the test is
// about that very address.
func startAt(t *testing.T, cfg Config) *Node {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testkit.Quiet()
	}
	if cfg.Tune == nil {
		cfg.Tune = testkit.FastRaft
	}
	for attempt := 1; ; attempt++ {
		n, err := Start(cfg)
		switch {
		case err == nil:
			t.Cleanup(func() { _ = n.Shutdown() })
			return n
		case !errors.Is(err, syscall.EADDRINUSE):
			t.Fatal(err)
		case attempt == rebindAttempts:
			t.Skipf("the raft address %s, released by the node that %s stands in for, is held by another process "+
				"(%d attempts; %v): this test needs that address", cfg.BindAddr, cfg.NodeID, attempt, err)
		}
		_ = testkit.Until(context.Background(), time.Second, cfg.BindAddr+" to be free", func() bool {
			ln, err := net.Listen("tcp", cfg.BindAddr)
			if err == nil {
				_ = ln.Close()
			}
			return err == nil
		})
	}
}

// addNonvoter adds follower to leader's configuration as a non-voter, as the voter reconciler
// does for a gateway that joined.
func addNonvoter(t *testing.T, leader, follower *Node) {
	t.Helper()
	change := voters.Change{Kind: voters.ChangeAddNonvoter, ID: follower.ID(), Address: follower.Address()}
	if err := leader.ChangeMembership(change, 0, 5*time.Second).Error(); err != nil {
		t.Fatalf("add %s: %v", follower.ID(), err)
	}
}

// register writes a worker on port through n, which must lead, and returns its id.
func register(t *testing.T, n *Node, port int) worker.ID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := spec(t, port)
	if _, err := n.Apply(ctx, fsm.Register{Spec: s, Owner: n.ID(), At: time.Unix(1, 0)}); err != nil {
		t.Fatalf("register on %s: %v", n.ID(), err)
	}
	return s.ID()
}

// failedHeartbeat is when leader's last heartbeat to peer failed, as raft told it (heartbeats).
func failedHeartbeat(leader *Node, peer string) time.Time {
	leader.hb.mu.Lock()
	defer leader.hb.mu.Unlock()
	return leader.hb.failed[raft.ServerID(peer)]
}

// holdsOver fails t as soon as cond stops holding, and returns once leader's heartbeats to peer
// failed heldAttempts more times: a bounded watch that something does not happen, counted in
// the leader's attempts at the address rather than in wall-clock time, so that a loaded machine
// makes it longer, not weaker. testkit.Deadline bounds it.
func holdsOver(t *testing.T, leader *Node, peer, what string, cond func() bool) {
	t.Helper()
	last, failed, broke := failedHeartbeat(leader, peer), 0, false
	err := testkit.Until(context.Background(), testkit.Deadline,
		fmt.Sprintf("%d more failed heartbeats of %s to %s", heldAttempts, leader.ID(), peer), func() bool {
			if broke = !cond(); broke {
				return true
			}
			if at := failedHeartbeat(leader, peer); at.After(last) {
				last, failed = at, failed+1
			}
			return failed >= heldAttempts
		})
	if broke {
		t.Fatalf("%s no longer holds", what)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestAnotherClusterOnADeadMembersRaftAddress: cluster A (a1 leading, a2 a non-voter) on raft's
// TCP transport loses a2, and a new gateway b1 of a separate cluster B binds a2's raft address
// (Kubernetes reuses pod IPs). A's leader keeps dialing a2 there; b1 refuses those connections,
// keeps leading B with its own log and never takes A's entries, and a1 keeps counting a2
// unreachable.
func TestAnotherClusterOnADeadMembersRaftAddress(t *testing.T) {
	a1, addr, fromA := loseNonvoter(t, "a2", 8201)
	var logs logBuffer
	b1 := startAt(t, tcpNode("b1", addr, logs.Logger(slog.LevelWarn), nil))
	testkit.For(t, "b1 to lead B with a cluster id of its own", func() bool {
		if _, took := b1.Worker(fromA); took || b1.ClusterID() == a1.ClusterID() {
			t.Fatalf("b1 took A's entries (cluster id %q, A's is %q), so A's leader took it over\n%s", b1.ClusterID(), a1.ClusterID(), logs.String())
		}
		return b1.IsLeader() && b1.ClusterID() != ""
	})
	fromB := register(t, b1, 8202)
	cluster, workers := b1.ClusterID(), b1.Workers()
	own := func() bool {
		_, took := b1.Worker(fromA)
		return b1.IsLeader() && b1.ClusterID() == cluster && !took && len(b1.Workers()) == len(workers) &&
			a1.RaftUnreachable("a2")
	}
	testkit.For(t, "b1 to refuse a1's connection meant for a2", func() bool {
		if !own() {
			t.Fatalf("b1 was taken over by A's leader: leader %v, cluster %q (was %q), workers %d (was %d), has A's worker: %v; a1 reaches a2: %v\n%s",
				b1.IsLeader(), b1.ClusterID(), cluster, len(b1.Workers()), len(workers), func() bool { _, ok := b1.Worker(fromA); return ok }(),
				!a1.RaftUnreachable("a2"), logs.String())
		}
		return len(logs.Lines("raft listener: refused", "a2")) > 0
	})
	t.Log(logs.Lines("raft listener: refused")[0])
	register(t, a1, 8203) // an entry a1 must replicate to a2
	holdsOver(t, a1, "a2", "b1 leading B with its own log", own)
	if _, ok := b1.Worker(fromB); !ok {
		t.Fatal("b1 lost its own write")
	}
}

// loseNonvoter starts cluster A on raft's TCP transport, a1 leading and id a non-voter (on a
// releasable address) that applied a1's write of a worker on port, then stops id. It returns
// a1, the raft address id had, and the worker's id, once a1 found id unreachable.
func loseNonvoter(t *testing.T, id string, port int) (*Node, string, worker.ID) {
	t.Helper()
	a1 := startNode(t, tcpNode("a1", "", nil, nil))
	waitReady(t, a1)
	lost := startAt(t, tcpNode(id, releasableAddr(t), nil, func(c *Config) { c.Join = []string{"a1"} }))
	addNonvoter(t, a1, lost)
	w := register(t, a1, port)
	testkit.For(t, id+" to apply A's write", func() bool { _, ok := lost.Worker(w); return ok })
	addr := lost.Address()
	if err := lost.Shutdown(); err != nil {
		t.Fatal(err)
	}
	testkit.For(t, "a1 to find "+id+" unreachable", func() bool { return a1.RaftUnreachable(id) })
	return a1, addr, w
}

// gateway is a node with the mesh a gateway runs beside it, wired as server/cluster.go wires
// them: raft starts first, then the mesh, which the hello reads (JoiningFromMesh,
// mesh.SpeaksRaftHello) and which publishes raft's cluster id and applied index
// (mesh.ProgressPublisher). The mesh joins nothing until the test joins it, the last step of a
// gateway's start.
type gateway struct {
	*Node
	mesh *mesh.Mesh
}

// startGateway starts cfg's node (startAt), then its mesh on loopback, and stops both when the
// test ends.
func startGateway(t *testing.T, cfg Config) gateway {
	t.Helper()
	var meshOf atomic.Pointer[mesh.Mesh]
	members := func() []mesh.Member {
		if m := meshOf.Load(); m != nil {
			return m.Members()
		}
		return nil
	}
	cfg.SendHello = func(addr string) bool { return mesh.SpeaksRaftHello(members(), addr) }
	cfg.JoiningCluster = JoiningFromMesh(cfg.NodeID, members)
	n := startAt(t, cfg)
	m, err := mesh.Start(mesh.Config{NodeID: cfg.NodeID, BindAddr: "127.0.0.1", Profile: mesh.ProfileLocal,
		Meta: mesh.Meta{RaftAddr: n.Address(), RaftHello: true}, Logger: testkit.Quiet(), Tune: fastGossip})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	meshOf.Store(m)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		mesh.ProgressPublisher{Mesh: m, Interval: 20 * time.Millisecond, Logger: testkit.Quiet(), Progress: func() mesh.Progress {
			return mesh.Progress{AppliedIndex: n.AppliedIndex(), ClusterID: n.ClusterID()}
		}}.Run(ctx)
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return gateway{Node: n, mesh: m}
}

// fastGossip shortens memberlist's timers for a loopback test.
func fastGossip(c *memberlist.Config) {
	c.ProbeInterval = 100 * time.Millisecond
	c.ProbeTimeout = 50 * time.Millisecond
	c.GossipInterval = 20 * time.Millisecond
	c.PushPullInterval = 500 * time.Millisecond
}

// TestAFreshJoinerBeforeItsMeshJoin: gw-2 of cluster B starts fresh, joining B, with the
// gateway's wiring (startGateway) on the raft address of A's dead gw-2 (StatefulSets of two
// clusters name their pods alike, and Kubernetes reuses pod IPs), while its mesh join has not
// merged (B's seed is still down: the usual start of a StatefulSet). Its raft state holds no
// cluster id and its mesh tells none: it refuses A's leader, whose hello names it, and takes
// none of A's entries. Once its mesh joined b1's, b1 adds it, and it takes B's log and cluster
// id; A's leader stays refused.
func TestAFreshJoinerBeforeItsMeshJoin(t *testing.T) {
	a1, addr, fromA := loseNonvoter(t, "gw-2", 8221)
	b1 := startGateway(t, tcpNode("b1", "", nil, nil))
	waitReady(t, b1.Node)
	fromB := register(t, b1.Node, 8223)

	var logs logBuffer
	joiner := startGateway(t, tcpNode("gw-2", addr, logs.Logger(slog.LevelWarn), func(c *Config) { c.Join = []string{b1.mesh.Addr()} }))
	outsideA := func() bool {
		_, took := joiner.Worker(fromA)
		return !took && joiner.ClusterID() != a1.ClusterID() && a1.RaftUnreachable("gw-2")
	}
	fresh := func() bool { return outsideA() && joiner.ClusterID() == "" }
	state := func() string {
		_, took := joiner.Worker(fromA)
		return fmt.Sprintf("a1 reaches gw-2: %v, gw-2 has A's worker: %v, gw-2's cluster %q (A's %q)\n%s",
			!a1.RaftUnreachable("gw-2"), took, joiner.ClusterID(), a1.ClusterID(), logs.String())
	}
	testkit.For(t, "gw-2, its mesh not joined, to refuse a1's connection", func() bool {
		if !fresh() {
			t.Fatalf("A's leader took gw-2 of B over before gw-2's mesh joined: %s", state())
		}
		return len(logs.Lines("raft listener: refused", "no cluster id yet", "gw-2")) > 0
	})
	t.Log(logs.Lines("raft listener: refused")[0])
	register(t, a1, 8222) // an entry a1 must replicate to its gw-2
	holdsOver(t, a1, "gw-2", "gw-2, its mesh not joined, outside A", fresh)

	if _, err := joiner.mesh.Join([]string{b1.mesh.Addr()}); err != nil {
		t.Fatal(err)
	}
	addNonvoter(t, b1.Node, joiner.Node)
	testkit.For(t, "gw-2 to take B's log", func() bool {
		if !outsideA() {
			t.Fatalf("A's leader took gw-2 of B over: %s", state())
		}
		_, ok := joiner.Worker(fromB)
		return ok && joiner.ClusterID() == b1.ClusterID()
	})
	holdsOver(t, a1, "gw-2", "gw-2 in B, outside A", func() bool {
		_, ok := joiner.Worker(fromB)
		return ok && outsideA()
	})
}

// TestHelloBootstrapExpectThroughTheMesh: three fresh gateways with --bootstrap-expect 3 and the
// gateway's wiring (startGateway), each strict about the hello until it has a cluster id of
// its own, bootstrap together once their meshes joined: the first leader's connections carry
// no cluster id until it set one, and a follower whose state has no id yet judges by the one
// its mesh peers agree on. All three reach one cluster id and apply a write. A connection of the
// new cluster that reaches a follower before the id did (in its state or in its peers'
// metadata) is refused and dialed again by raft; the test logs such refusals.
func TestHelloBootstrapExpectThroughTheMesh(t *testing.T) {
	var logs logBuffer
	var gws []gateway
	for _, id := range []string{"gw-0", "gw-1", "gw-2"} {
		gws = append(gws, startGateway(t, tcpNode(id, "", logs.Logger(slog.LevelWarn), func(c *Config) { c.BootstrapExpect = 3 })))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i, g := range gws {
		if i > 0 {
			if _, err := g.mesh.Join([]string{gws[0].mesh.Addr()}); err != nil {
				t.Fatal(err)
			}
		}
		wg.Go(func() {
			ExpectBootstrap{Expect: 3, Self: g.ID(), Node: g.Node, Members: g.mesh, Poll: 50 * time.Millisecond, Logger: testkit.Quiet()}.Run(ctx)
		})
	}
	var leader *Node
	testkit.For(t, "a leader with a cluster id", func() bool {
		for _, g := range gws {
			if g.IsLeader() && g.ClusterID() != "" {
				leader = g.Node
				return true
			}
		}
		return false
	})
	w := register(t, leader, 8231)
	for _, g := range gws {
		testkit.For(t, g.ID()+" to apply the write in the leader's cluster", func() bool {
			_, ok := g.Worker(w)
			return ok && g.ClusterID() == leader.ClusterID()
		})
	}
	if refused := logs.Lines("raft listener: refused"); len(refused) > 0 {
		t.Logf("refused and dialed again (lines spaced by refusalLogEvery): %q", refused)
	}
}

// TestAMemberOnAnothersRaftAddress: within one cluster, a3 restarts on the raft address of a2,
// which is dead. The leader's connections meant for a2 reach a3, which refuses them instead of
// answering for a2 (the leader would count a3 twice towards its quorum, and promote a dead
// a2 on a3's answers).
func TestAMemberOnAnothersRaftAddress(t *testing.T) {
	a1 := startNode(t, tcpNode("a1", "", nil, nil))
	waitReady(t, a1)
	dir3 := joiningStateDir(t, "a3")
	var followers []*Node
	for _, id := range []string{"a2", "a3"} {
		bind := ""
		if id == "a2" {
			bind = releasableAddr(t)
		}
		n := startAt(t, tcpNode(id, bind, nil, func(c *Config) {
			c.Join = []string{"a1"}
			if id == "a3" {
				c.Ephemeral, c.StateDir = false, dir3
			}
		}))
		addNonvoter(t, a1, n)
		followers = append(followers, n)
	}
	w := register(t, a1, 8211)
	for _, n := range followers {
		testkit.For(t, n.ID()+" to apply the write", func() bool { _, ok := n.Worker(w); return ok })
	}
	addr2 := followers[0].Address()
	for _, n := range followers {
		if err := n.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	testkit.For(t, "a1 to find a2 unreachable", func() bool { return a1.RaftUnreachable("a2") })

	var logs logBuffer
	startAt(t, tcpNode("a3", addr2, logs.Logger(slog.LevelWarn), func(c *Config) {
		c.Ephemeral, c.StateDir = false, dir3
	}))
	unreached := func() bool { return a1.RaftUnreachable("a2") }
	testkit.For(t, "a3 to refuse a1's connection meant for a2", func() bool {
		if !unreached() {
			t.Fatalf("a1 reached a2 at %s, where a3 answers for it\n%s", addr2, logs.String())
		}
		return len(logs.Lines("raft listener: refused", "a2")) > 0
	})
	t.Log(logs.Lines("raft listener: refused")[0])
	register(t, a1, 8212)
	holdsOver(t, a1, "a2", "a2 unreachable from a1", unreached)
}
