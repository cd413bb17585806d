package consensus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/consensustest"
	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/test/testkit"
)

// The write's acknowledgement as consensus and consensus/fleetack give it together: what the
// raft log and the stored commit index hold once the fleet acknowledged a write.

// alive is a mesh whose members are all alive and never change.
type alive []mesh.Member

func (m alive) Members() []mesh.Member         { return m }
func (alive) Watch() (<-chan struct{}, func()) { return make(chan struct{}), func() {} }

// ackedCluster is a cluster whose nodes serve fleet acknowledgements on 127.0.0.1, each node's
// data plane being its FSM, acknowledged once a restart would serve it too (Options.Saved), as
// a gateway's is.
type ackedCluster struct {
	*consensustest.Cluster
	acks []*fleetack.FleetAck
}

func startAcked(t *testing.T, size int, timeout time.Duration, tune ...func(i int, c *consensus.Config)) *ackedCluster {
	t.Helper()
	slow := func(_ int, c *consensus.Config) { c.Tune = consensustest.SlowCommitRaft }
	c := &ackedCluster{Cluster: consensustest.Start(t, size, append([]func(int, *consensus.Config){slow}, tune...)...)}
	var members alive
	for _, n := range c.Nodes {
		members = append(members, mesh.Member{ID: n.ID(), Status: mesh.StatusAlive})
	}
	c.Serve(t, nil, func(i int, s *grpc.Server) {
		a, err := fleetack.New(c.Nodes[i], fleetack.Options{Local: c.Nodes[i], Saved: c.Nodes[i], Members: members,
			ResolveRPC: c.ResolveRPC, Timeout: timeout, Logger: testkit.Quiet(), Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close() })
		a.Register(s)
		c.acks = append(c.acks, a)
	})
	return c
}

// register writes a registration through the leader and returns its result.
func (c *ackedCluster) register(t *testing.T, lead, port int) fsm.Result {
	t.Helper()
	res, err := c.Nodes[lead].Apply(context.Background(), fsm.Register{Spec: consensustest.Spec(t, port), Owner: "n1", At: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func follower(lead, size int) int { return (lead + 1) % size }

// onDisk keeps node i's state in dirs[i], a state directory of its own.
func onDisk(t *testing.T, dirs []string) func(i int, c *consensus.Config) {
	for i := range dirs {
		d, err := storage.PrepareNodeDir(t.TempDir(), fmt.Sprintf("n%d", i+1), testkit.Quiet())
		if err != nil {
			t.Fatal(err)
		}
		dirs[i] = d.Path
	}
	return func(i int, c *consensus.Config) { c.Ephemeral, c.StateDir = false, dirs[i] }
}

// The followers learn that a write committed from the leader's commit notice, not from an entry
// appended after it: an acknowledged write adds one entry to the log, not two, so the next
// write queues behind no Barrier and no disk waits twice per write.
func TestNoEntryFollowsAnAcknowledgedWrite(t *testing.T) {
	c := startAcked(t, 3, 5*time.Second)
	lead := c.WaitLeader(t, 0, 1, 2)
	consensustest.WaitReady(t, c.Nodes[lead])
	f := follower(lead, 3)
	for i := range 5 {
		res := c.register(t, lead, 8120+i)
		start := time.Now()
		if rep := c.acks[f].Acknowledge(context.Background(), res.Index); len(rep.Lagging) > 0 {
			t.Fatalf("write %d: lagging %v", i, rep.Lagging)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("write %d was acknowledged after %v: a follower learned it committed only from raft (CommitTimeout is 2 s)", i, took)
		}
		if last := c.Nodes[lead].LastIndex(); last != res.Index {
			t.Fatalf("write %d at index %d: the leader's log ends at %d once it is acknowledged, with %d Barrier entries after it",
				i, res.Index, last, c.Nodes[lead].BarriersAfter(t, res.Index))
		}
	}
}

// Once a write is acknowledged, every node's stored commit index covers it, so a restart
// serves it before any leader exists; and no entry appended after the write carried it there.
func TestAcknowledgedWriteIsStoredWithoutAnotherEntry(t *testing.T) {
	c := startAcked(t, 3, 5*time.Second, onDisk(t, make([]string, 3)))
	lead := c.WaitLeader(t, 0, 1, 2)
	consensustest.WaitReady(t, c.Nodes[lead])
	f := follower(lead, 3)
	for i := range 3 {
		res := c.register(t, lead, 8310+i)
		if rep := c.acks[f].Acknowledge(context.Background(), res.Index); len(rep.Lagging) > 0 {
			t.Fatalf("write %d: lagging %v", i, rep.Lagging)
		}
		for _, n := range c.Nodes {
			if got := n.StoredCommitIndex(); got < res.Index {
				t.Errorf("write %d at index %d acknowledged: %s stored commit index %d", i, res.Index, n.ID(), got)
			}
		}
		if last := c.Nodes[lead].LastIndex(); last != res.Index {
			t.Fatalf("write %d at index %d: the leader's log ends at %d", i, res.Index, last)
		}
	}
}

// A follower acknowledges a write once it applied it and the commit index stored with its raft
// log covers it: it does not wait for a save of its applied state (here an hour away). Killed
// right after, it restarts alone, with no leader, and serves the write from the first read:
// at start it applies the committed entries its log holds past the saved state.
func TestAcknowledgedWriteServedAfterCrashBeforeSave(t *testing.T) {
	dirs := make([]string, 3)
	saveHourly := func(_ int, c *consensus.Config) { consensus.SaveEvery(c, time.Hour) }
	c := startAcked(t, 3, 10*time.Second, onDisk(t, dirs), saveHourly)
	lead := c.WaitLeader(t, 0, 1, 2)
	f := follower(lead, 3)
	testkit.For(t, "the follower's first save", func() bool { return c.Nodes[f].SavedIndex() > 0 })

	res := c.register(t, lead, 8001)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	disabled := true
	dis, err := c.Nodes[lead].Apply(context.Background(),
		fsm.SetFlags{ID: res.Record.ID, Flags: fsm.FlagChange{Disabled: &disabled, Reason: "maint", By: "ops", At: now}})
	if err != nil || dis.Outcome != fsm.Updated {
		t.Fatalf("disable: %+v, %v", dis, err)
	}
	start := time.Now()
	rep := c.acks[lead].Acknowledge(context.Background(), dis.Index)
	if len(rep.Lagging) > 0 {
		t.Fatalf("lagging %v after %s: a follower waited for a save of its applied state", rep.Lagging, time.Since(start))
	}
	want := c.Nodes[f].Workers()
	if len(want) != 1 || !want[0].Disabled {
		t.Fatalf("the follower acknowledged without the disabled record: %+v (register at %d)", want, res.Index)
	}

	consensus.Crash(t, c.Nodes[f])
	restarted := consensustest.StartNode(t, consensus.Config{NodeID: fmt.Sprintf("n%d", f+1), StateDir: dirs[f],
		Transport: func() raft.Transport { _, tr := raft.NewInmemTransport(""); return tr }(), Tune: consensus.NoElection})
	if diff := cmp.Diff(want, restarted.Workers()); diff != "" {
		t.Fatalf("records served at start, with no leader (-want +got):\n%s", diff)
	}
	if restarted.AppliedIndex() < dis.Index {
		t.Fatalf("applied index %d at start, want at least %d", restarted.AppliedIndex(), dis.Index)
	}
}
