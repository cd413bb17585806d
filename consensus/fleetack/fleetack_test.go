package fleetack

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/consensustest"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/testkit"
)

// stuckApplied is a data plane that never applies anything.
type stuckApplied struct{}

func (stuckApplied) WaitApplied(ctx context.Context, index uint64) uint64 {
	<-ctx.Done()
	return 0
}

// staticMembers is a mesh whose members a test sets.
type staticMembers struct {
	mu       sync.Mutex
	members  []mesh.Member
	watchers []chan struct{}
}

func (m *staticMembers) Members() []mesh.Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]mesh.Member(nil), m.members...)
}

// Watch signals on every set.
func (m *staticMembers) Watch() (<-chan struct{}, func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan struct{}, 1)
	m.watchers = append(m.watchers, ch)
	return ch, func() {}
}

// set changes one member's status (adding it when missing) and signals the watchers.
func (m *staticMembers) set(id string, st mesh.Status) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.members, func(x mesh.Member) bool { return x.ID == id })
	if i < 0 {
		m.members = append(m.members, mesh.Member{ID: id})
		i = len(m.members) - 1
	}
	m.members[i].Status = st
	for _, w := range m.watchers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// ackCluster is an in-memory raft cluster whose nodes serve FleetAck on 127.0.0.1.
type ackCluster struct {
	*consensustest.Cluster
	acks    []*FleetAck
	regs    []*prometheus.Registry // each FleetAck's metrics
	members *staticMembers
	// asked counts the WaitApplied calls each node served; watch sets how each serves
	// WatchApplied (feed_test.go).
	asked []atomic.Int64
	watch []atomic.Int32
	// pushed counts the applied indexes sent on WatchApplied streams, by sender and watcher id.
	pushedMu sync.Mutex
	pushed   map[[2]string]int
}

// startAckCluster starts size ephemeral nodes, raft tuned by consensustest.SlowCommitRaft;
// local gives each node's data plane.
func startAckCluster(t *testing.T, size int, timeout time.Duration, local func(i int, n *consensus.Node) Applied) *ackCluster {
	t.Helper()
	slow := func(_ int, c *consensus.Config) { c.Tune = consensustest.SlowCommitRaft }
	c := &ackCluster{Cluster: consensustest.Start(t, size, slow),
		members: &staticMembers{}, asked: make([]atomic.Int64, size), watch: make([]atomic.Int32, size), pushed: make(map[[2]string]int)}
	for _, n := range c.Nodes {
		c.members.members = append(c.members.members, mesh.Member{ID: n.ID(), Status: mesh.StatusAlive})
	}
	c.Serve(t, c.interceptors, func(i int, s *grpc.Server) {
		reg := prometheus.NewRegistry()
		a, err := New(c.Nodes[i], Options{Local: local(i, c.Nodes[i]), Members: c.members, ResolveRPC: c.ResolveRPC,
			Timeout: timeout, Logger: testkit.Quiet(), Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close() })
		a.Register(s)
		c.acks = append(c.acks, a)
		c.regs = append(c.regs, reg)
	})
	return c
}

// register writes a registration through the leader and returns its index.
func (c *ackCluster) register(t *testing.T, lead, port int) (fsm.Result, fsm.Record) {
	t.Helper()
	s := consensustest.Spec(t, port)
	res, err := c.Nodes[lead].Apply(context.Background(), fsm.Register{Spec: s, Owner: "n1", At: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	return res, *res.Record
}

func follower(lead, size int) int { return (lead + 1) % size }

// A write is acknowledged by every live peer well before raft's CommitTimeout would have told
// the followers it committed: the leader's commit notice did.
func TestFleetAckAcknowledgesEveryLivePeer(t *testing.T) {
	c := startAckCluster(t, 3, 5*time.Second, func(_ int, n *consensus.Node) Applied { return n })
	lead := c.WaitLeader(t, 0, 1, 2)
	consensustest.WaitReady(t, c.Nodes[lead])
	res, rec := c.register(t, lead, 8101)
	f := follower(lead, 3)
	start := time.Now()
	rep := c.acks[f].Acknowledge(context.Background(), res.Index)
	took := time.Since(start)
	want := Report{Index: res.Index, Acked: []string{"n1", "n2", "n3"}, Lagging: []string{}}
	if diff := cmp.Diff(want, rep); diff != "" {
		t.Fatalf("report (-want +got):\n%s", diff)
	}
	if took > time.Second {
		t.Errorf("the acknowledgement took %v: the followers learned the commit only from raft (CommitTimeout is 2 s)", took)
	}
	for i, n := range c.Nodes {
		if _, ok := n.Worker(rec.ID); !ok {
			t.Errorf("n%d acknowledged without the record", i+1)
		}
	}
}

// The leader tells the followers that a write committed as soon as it applied it, before any
// writer asks for an acknowledgement: a write forwarded from a follower saves the round trip of
// its answer and of the writer's WaitApplied to the leader.
func TestLeaderTellsFollowersOfEachWrite(t *testing.T) {
	c := startAckCluster(t, 3, 5*time.Second, func(_ int, n *consensus.Node) Applied { return n })
	lead := c.WaitLeader(t, 0, 1, 2)
	consensustest.WaitReady(t, c.Nodes[lead])
	res, _ := c.register(t, lead, 8102) // no Acknowledge: only the write itself
	f := c.Nodes[follower(lead, 3)]
	ctx, cancel := context.WithTimeout(context.Background(), time.Second) // CommitTimeout is 2 s
	defer cancel()
	if got := f.WaitApplied(ctx, res.Index); got < res.Index {
		t.Fatalf("the follower applied %d within 1 s, not the write's %d: the leader did not tell it", got, res.Index)
	}
}

// Peers that are dead or left are not waited for; a live peer that never applies, or whose
// address is unknown, lags, and the wait ends at the timeout.
func TestFleetAckNamesLaggingPeers(t *testing.T) {
	const timeout = 300 * time.Millisecond
	c := startAckCluster(t, 3, timeout, func(i int, n *consensus.Node) Applied {
		if i == 2 {
			return stuckApplied{}
		}
		return n
	})
	c.members.mu.Lock()
	c.members.members = append(c.members.members,
		mesh.Member{ID: "n8", Status: mesh.StatusAlive}, // no gRPC address known
		mesh.Member{ID: "n9", Status: mesh.StatusDead},
		mesh.Member{ID: "n10", Status: mesh.StatusLeft})
	c.members.mu.Unlock()
	lead := c.WaitLeader(t, 0, 1, 2)
	consensustest.WaitReady(t, c.Nodes[lead])
	res, _ := c.register(t, lead, 8102)
	start := time.Now()
	rep := c.acks[0].Acknowledge(context.Background(), res.Index)
	took := time.Since(start)
	want := Report{Index: res.Index, Acked: []string{"n1", "n2"}, Lagging: []string{"n3", "n8"}}
	if diff := cmp.Diff(want, rep); diff != "" {
		t.Fatalf("report (-want +got):\n%s", diff)
	}
	if took < timeout-50*time.Millisecond || took > timeout+2*time.Second {
		t.Errorf("the acknowledgement took %v; want about the timeout %v", took, timeout)
	}
	// The writer counts the lagging write once, and each peer that lagged, for the alert.
	wantMetrics := `
# HELP meshgw_fleet_ack_lagging_total Fleet-acknowledged writes of this gateway that a live peer did not apply within --fleet-ack-timeout-secs, by that peer's node id.
# TYPE meshgw_fleet_ack_lagging_total counter
meshgw_fleet_ack_lagging_total{peer="n3"} 1
meshgw_fleet_ack_lagging_total{peer="n8"} 1
# HELP meshgw_fleet_acks_total Admin writes this gateway waited on the fleet for, by result: acked (every live peer applied it in time) or lagging (some did not).
# TYPE meshgw_fleet_acks_total counter
meshgw_fleet_acks_total{result="acked"} 0
meshgw_fleet_acks_total{result="lagging"} 1
`
	if err := testutil.GatherAndCompare(c.regs[0], strings.NewReader(wantMetrics), "meshgw_fleet_ack_lagging_total", "meshgw_fleet_acks_total"); err != nil {
		t.Error(err)
	}
}

// A suspect peer may still route (a slow network, a paused process about to resume): it is
// waited for, and named lagging when it does not apply the write in time. One the mesh declares
// dead during the wait is waited for no longer: the write answers then, naming it lagging.
func TestFleetAckWaitsForSuspectPeers(t *testing.T) {
	const timeout = 400 * time.Millisecond
	c := startAckCluster(t, 3, timeout, func(i int, n *consensus.Node) Applied {
		if i == 2 {
			return stuckApplied{}
		}
		return n
	})
	lead := c.WaitLeader(t, 0, 1, 2)
	consensustest.WaitReady(t, c.Nodes[lead])
	c.members.set("n3", mesh.StatusSuspect)
	res, _ := c.register(t, lead, 8103)
	rep := c.acks[0].Acknowledge(context.Background(), res.Index)
	want := Report{Index: res.Index, Acked: []string{"n1", "n2"}, Lagging: []string{"n3"}}
	if diff := cmp.Diff(want, rep); diff != "" {
		t.Fatalf("suspect n3: report (-want +got):\n%s", diff)
	}

	c.acks[0].o.Timeout = time.Minute
	res, _ = c.register(t, lead, 8104)
	done := make(chan Report, 1)
	asked := c.asked[2].Load()
	go func() { done <- c.acks[0].Acknowledge(context.Background(), res.Index) }()
	// n3 never pushes the index: after feedGrace, n1 asks it too.
	testkit.For(t, "n1 waiting on n3", func() bool { return c.asked[2].Load() > asked })
	c.members.set("n3", mesh.StatusDead)
	select {
	case rep = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the write still waits for n3, declared dead")
	}
	want = Report{Index: res.Index, Acked: []string{"n1", "n2"}, Lagging: []string{"n3"}}
	if diff := cmp.Diff(want, rep); diff != "" {
		t.Fatalf("n3 declared dead: report (-want +got):\n%s", diff)
	}
}

// A read barrier on a follower returns only once it applied what the leader acknowledged,
// which raft alone would tell it only after CommitTimeout.
func TestBarrierFollowerReadsLeaderWrites(t *testing.T) {
	c := startAckCluster(t, 3, 5*time.Second, func(_ int, n *consensus.Node) Applied { return n })
	lead := c.WaitLeader(t, 0, 1, 2)
	consensustest.WaitReady(t, c.Nodes[lead])
	f := follower(lead, 3)
	for i := range 5 {
		res, rec := c.register(t, lead, 8110+i)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.acks[f].Barrier(ctx)
		cancel()
		if err != nil {
			t.Fatalf("write %d: barrier: %v", i, err)
		}
		if got := c.Nodes[f].AppliedIndex(); got < res.Index {
			t.Fatalf("write %d: after the barrier the follower applied %d, want %d", i, got, res.Index)
		}
		if _, ok := c.Nodes[f].Worker(rec.ID); !ok {
			t.Fatalf("write %d: after the barrier the follower has no record of it", i)
		}
	}
}

// ReadIndex answers only on the leader; a follower names it.
func TestReadIndexOnlyOnTheLeader(t *testing.T) {
	c := startAckCluster(t, 3, 5*time.Second, func(_ int, n *consensus.Node) Applied { return n })
	lead := c.WaitLeader(t, 0, 1, 2)
	consensustest.WaitReady(t, c.Nodes[lead])
	ctx := context.Background()
	got, err := (&fleetAckServer{a: c.acks[lead]}).ReadIndex(ctx, &consensusv1.ReadIndexRequest{From: "test"})
	if err != nil || got.Status != consensusv1.ReadIndexStatus_READ_INDEX_STATUS_OK || got.Index < c.Nodes[lead].AppliedIndex() {
		t.Fatalf("leader: %v, %v", got, err)
	}
	f := follower(lead, 3)
	got, err = (&fleetAckServer{a: c.acks[f]}).ReadIndex(ctx, &consensusv1.ReadIndexRequest{From: "test"})
	if err != nil || got.Status != consensusv1.ReadIndexStatus_READ_INDEX_STATUS_NOT_LEADER || got.LeaderId != c.Nodes[lead].ID() {
		t.Fatalf("follower: %v, %v", got, err)
	}
}
