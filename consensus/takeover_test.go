package consensus

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// holdWindow is how long a takeover test watches, after the first refusal, that the refused
// node keeps its own state: raft's leader dials a failed follower again after a backoff that
// grows to 640 ms by the eighth failure, so the window sees several refused attempts.
const holdWindow = 2 * time.Second

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

// holds polls cond for d and fails t with what the first time it does not hold.
func holds(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	broke := false
	_ = testkit.Until(context.Background(), d, what, func() bool {
		broke = !cond()
		return broke
	})
	if broke {
		t.Fatalf("%s no longer holds", what)
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
	b1 := startNode(t, tcpNode("b1", addr, logs.Logger(slog.LevelWarn), nil))
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
	holds(t, holdWindow, "b1 leading B with its own log", own)
	if _, ok := b1.Worker(fromB); !ok {
		t.Fatal("b1 lost its own write")
	}
}

// loseNonvoter starts cluster A on raft's TCP transport, a1 leading and id a non-voter that
// applied a1's write of a worker on port, then stops id. It returns a1, the raft address id
// had, and the worker's id, once a1 found id unreachable.
func loseNonvoter(t *testing.T, id string, port int) (*Node, string, worker.ID) {
	t.Helper()
	a1 := startNode(t, tcpNode("a1", "", nil, nil))
	waitReady(t, a1)
	lost := startNode(t, tcpNode(id, "", nil, func(c *Config) { c.Join = []string{"a1"} }))
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

// TestAFreshJoinerWithADeadMembersNodeID: a gateway of cluster B whose node id is that of a
// dead member of A (StatefulSets of two clusters name their pods alike) starts fresh, joining
// B, on that member's raft address. Its raft state holds no cluster id yet, but its mesh tells
// the one it joins (Config.JoiningCluster): it refuses A's leader, whose hello names it, and
// takes none of A's entries.
func TestAFreshJoinerWithADeadMembersNodeID(t *testing.T) {
	a1, addr, fromA := loseNonvoter(t, "gw-2", 8221)
	var logs logBuffer
	joiner := startNode(t, tcpNode("gw-2", addr, logs.Logger(slog.LevelWarn), func(c *Config) {
		c.Join = []string{"b1"}
		c.JoiningCluster = func() string { return "the cluster of B" }
	}))
	own := func() bool {
		_, took := joiner.Worker(fromA)
		return !took && joiner.ClusterID() == "" && a1.RaftUnreachable("gw-2")
	}
	testkit.For(t, "gw-2 to refuse a1's connection", func() bool {
		if !own() {
			t.Fatalf("a1 took gw-2 of B into A: cluster %q\n%s", joiner.ClusterID(), logs.String())
		}
		return len(logs.Lines("raft listener: refused", "another cluster")) > 0
	})
	register(t, a1, 8222)
	holds(t, holdWindow, "gw-2 outside A", own)
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
		n := startNode(t, tcpNode(id, "", nil, func(c *Config) {
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
	startNode(t, tcpNode("a3", addr2, logs.Logger(slog.LevelWarn), func(c *Config) {
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
	holds(t, holdWindow, "a2 unreachable from a1", unreached)
}
