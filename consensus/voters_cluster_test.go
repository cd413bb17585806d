package consensus

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/consensus/voters/voterstest"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/test/testkit"
)

// startJoiningCluster starts one node per region on raft's in-memory transport. n1 bootstraps a
// cluster of one voter, itself, and runs r's loop as its leader loop. The others start as a joining
// node will: with raft state that holds no configuration (only a term), so that they do not
// bootstrap and wait as followers outside the configuration until the leader adds them.
func startJoiningCluster(t *testing.T, r *lateVoters, regions ...string) *cluster {
	t.Helper()
	c := startJoiningClusterWith(t, []*lateVoters{r}, regions...)
	return c
}

// startJoiningClusterWith is startJoiningCluster where node i runs rs[i] (when there is one) as
// its leader loop.
func startJoiningClusterWith(t *testing.T, rs []*lateVoters, regions ...string) *cluster {
	t.Helper()
	c := &cluster{byAddr: make(map[raft.ServerAddress]*raft.InmemTransport)}
	for i := range regions {
		addr, trans := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("mem-n%d", i+1)))
		c.trans = append(c.trans, trans)
		c.byAddr[addr] = trans
	}
	c.heal()
	for i := range regions {
		cfg := Config{
			NodeID:     fmt.Sprintf("n%d", i+1),
			Ephemeral:  i == 0,
			Transport:  c.trans[i],
			Registerer: prometheus.NewRegistry(),
			Tune:       clusterRaft,
		}
		if i < len(rs) {
			cfg.LeaderLoop = rs[i].loop.Run
		}
		if i > 0 {
			cfg.StateDir = joiningStateDir(t, cfg.NodeID)
		}
		c.nodes = append(c.nodes, startNode(t, cfg))
	}
	for i, r := range rs {
		r.bind(t, c.nodes[i])
	}
	return c
}

// joiningStateDir returns a node folder whose raft state is a current term of 1 and nothing
// else: raft.HasExistingState holds, so Start does not bootstrap.
func joiningStateDir(t *testing.T, id string) string {
	t.Helper()
	dir, err := storage.PrepareNodeDir(t.TempDir(), id, testkit.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(dir.RaftDB(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(db.SetUint64([]byte("CurrentTerm"), 1), db.Close()); err != nil {
		t.Fatal(err)
	}
	return dir.Path
}

// serversOf returns the leader's configuration as sorted "id:suffrage" strings.
func serversOf(t *testing.T, n *Node) []string {
	t.Helper()
	info, err := n.Info()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range info.Servers {
		out = append(out, s.ID+":"+s.Suffrage)
	}
	slices.Sort(out)
	return out
}

func waitServers(t *testing.T, n *Node, want ...string) {
	t.Helper()
	var got []string
	testkit.For(t, "the configuration "+strings.Join(want, " "), func() bool {
		got = serversOf(t, n)
		return slices.Equal(got, want)
	})
}

func TestVotersCluster(t *testing.T) {
	var logs logBuffer
	regions := []string{"a", "a", "b", "b", "c"}
	m := voterstest.NewMembership()
	for i, region := range regions {
		id := fmt.Sprintf("n%d", i+1)
		m.Set(voters.Peer{ID: id, RaftAddress: "mem-" + id, Region: region, Status: mesh.StatusAlive, Since: time.Now()})
	}
	// A short reconcile interval, so that a test can wait for a pass that started after the
	// membership changed (passes).
	r := newLateVoters(voters.Config{Membership: m, Voters: 3, ReconcileInterval: 20 * time.Millisecond, Logger: logs.Logger(slog.LevelInfo)})
	c := startJoiningCluster(t, r, regions...)
	leader := c.nodes[0]
	waitReady(t, leader)
	// passes waits for a pass that started after the call: the one running then, which may
	// have read the membership before it changed, ends first.
	passes := func(what string) {
		t.Helper()
		before := r.Passes()
		testkit.For(t, what, func() bool { return r.Passes() > before+1 })
	}

	// --raft-voters 3. One voter and four alive peers: three voters, one per region, and two non-voters that
	// replicate the log.
	waitServers(t, leader, "n1:voter", "n2:nonvoter", "n3:voter", "n4:nonvoter", "n5:voter")
	// The configuration shows a change once appended; its line follows the commit.
	testkit.For(t, "6 change lines (4 adds, 2 promotions)", func() bool { return len(logs.Lines("raft membership changed")) >= 6 })
	res, err := leader.Apply(t.Context(), fsm.Register{Spec: spec(t, 8101), Owner: leader.ID()})
	if err != nil {
		t.Fatal(err)
	}
	waitApplied(t, c.nodes, res.Index)

	// Nothing changed: a pass changes nothing.
	_, index, err := leader.Configuration()
	if err != nil {
		t.Fatal(err)
	}
	m.Set() // a signal without news
	passes("a pass after the signal")
	if _, now, _ := leader.Configuration(); now != index {
		t.Fatalf("an unchanged membership changed the configuration (index %d to %d)", index, now)
	}

	// n3 (voter, region b) dies. Within the grace it keeps its seat; past it, it is removed and
	// n4, the live non-voter of region b, takes the seat.
	if err := c.nodes[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	m.Set(voters.Peer{ID: "n3", RaftAddress: "mem-n3", Region: "b", Status: mesh.StatusDead, Since: time.Now()})
	passes("a pass after n3 died")
	if got := serversOf(t, leader); !slices.Contains(got, "n3:voter") {
		t.Fatalf("n3 lost its seat within the grace: %v", got)
	}
	m.Set(voters.Peer{ID: "n3", RaftAddress: "mem-n3", Region: "b", Status: mesh.StatusDead, Since: time.Now().Add(-voters.DefaultDeadVoterGrace - time.Second)})
	waitServers(t, leader, "n1:voter", "n2:nonvoter", "n4:voter", "n5:voter")

	// n2 (non-voter) leaves: it is removed at once. n5 (voter) leaves without a drain: it is one
	// that died, and keeps its seat for the grace; past it, it is removed (--raft-voters 3, so
	// rule 7 does not keep it).
	m.Set(voters.Peer{ID: "n2", RaftAddress: "mem-n2", Region: "a", Status: mesh.StatusLeft, Since: time.Now()})
	waitServers(t, leader, "n1:voter", "n4:voter", "n5:voter")
	m.Set(voters.Peer{ID: "n5", RaftAddress: "mem-n5", Region: "c", Status: mesh.StatusLeft, Since: time.Now()})
	passes("a pass after n5 left")
	if got := serversOf(t, leader); !slices.Contains(got, "n5:voter") {
		t.Fatalf("n5 lost its seat within the grace: %v", got)
	}
	m.Set(voters.Peer{ID: "n5", RaftAddress: "mem-n5", Region: "c", Status: mesh.StatusLeft, Since: time.Now().Add(-voters.DefaultDeadVoterGrace - time.Second)})
	waitServers(t, leader, "n1:voter", "n4:voter")

	// The two voters left still commit.
	res, err = leader.Apply(t.Context(), fsm.Register{Spec: spec(t, 8102), Owner: leader.ID()})
	if err != nil {
		t.Fatal(err)
	}
	waitApplied(t, []*Node{leader, c.nodes[3]}, res.Index)
	if diff := cmp.Diff(leader.Workers(), c.nodes[3].Workers()); diff != "" {
		t.Fatalf("n4 differs from the leader:\n%s", diff)
	}
	// One line per change: 6, then remove n3, promote n4, remove n2 and remove n5; no failure.
	testkit.For(t, "10 change lines", func() bool { return len(logs.Lines("raft membership changed")) >= 10 })
	if got, failed := logs.Lines("raft membership changed"), logs.Lines("change failed"); len(got) != 10 || len(failed) != 0 {
		t.Fatalf("%d change lines (want 10), %d failures (want 0):\n%s", len(got), len(failed), logs.String())
	}
	for _, line := range logs.Lines("raft membership change") {
		if !strings.Contains(line, "reason=") {
			t.Fatalf("a change line without its reason: %s", line)
		}
	}
}

// TestVotersDrainHandsOver: every node runs the voter reconciler as its leader loop.
// Once the leader n1 is marked draining, it hands the leadership to n2, which demotes n1: the
// draining peer ends as a non-voter that no longer leads, ready to leave.
func TestVotersDrainHandsOver(t *testing.T) {
	m := voterstest.NewMembership()
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		m.Set(voters.Peer{ID: id, RaftAddress: "mem-" + id, Region: "a", Status: mesh.StatusAlive, Since: time.Now()})
	}
	var rs []*lateVoters
	for range 3 {
		// --raft-voters 3: two gateways would keep one voter, and n3 would be demoted too.
		r := newLateVoters(voters.Config{Membership: m, Voters: 3, Logger: testkit.Quiet()})
		rs = append(rs, r)
	}
	c := startJoiningClusterWith(t, rs, "a", "a", "a")
	leader := c.nodes[0]
	waitReady(t, leader)
	waitServers(t, leader, "n1:voter", "n2:voter", "n3:voter")

	m.Set(voters.Peer{ID: "n1", RaftAddress: "mem-n1", Region: "a", Status: mesh.StatusAlive, Since: time.Now(), Draining: true})
	testkit.For(t, "n2 to lead", func() bool { return c.nodes[1].IsLeader() })
	waitServers(t, c.nodes[1], "n1:nonvoter", "n2:voter", "n3:voter")
	if leader.IsLeader() {
		t.Fatal("the draining n1 still leads")
	}
}

// TestVotersAutoCount: with the automatic count (Voters 0), five gateways that join one
// become five voters; a drained one gives its seat back, and once it is gone past the grace the
// four left keep three voters. What GET /mesh/raft shows follows (voters_wanted, voters_auto).
func TestVotersAutoCount(t *testing.T) {
	regions := []string{"a", "a", "b", "b", "c"}
	m := voterstest.NewMembership()
	for i, region := range regions {
		id := fmt.Sprintf("n%d", i+1)
		m.Set(voters.Peer{ID: id, RaftAddress: "mem-" + id, Region: region, Status: mesh.StatusAlive, Since: time.Now()})
	}
	r := newLateVoters(voters.Config{Membership: m, Logger: testkit.Quiet()})
	c := startJoiningCluster(t, r, regions...)
	leader := c.nodes[0]
	waitReady(t, leader)
	waitServers(t, leader, "n1:voter", "n2:voter", "n3:voter", "n4:voter", "n5:voter")
	// What GET /mesh/raft shows (package server): the voters of the configuration, and the
	// planner's own count of the voters wanted (voters.Shown).
	wanted := func() consensusInfoWanted {
		info, err := leader.Info()
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := leader.Configuration()
		if err != nil {
			t.Fatal(err)
		}
		want, auto := voters.Shown(cfg, m.Peers(), time.Now(), voters.Options{Self: info.Leader})
		return consensusInfoWanted{info.Voters, want, auto}
	}
	if got, want := wanted(), (consensusInfoWanted{5, 5, true}); got != want {
		t.Fatalf("voters, wanted, auto = %v; want %v", got, want)
	}

	// n5 drains: its seat goes, and the count stays 5 while it is there.
	m.Set(voters.Peer{ID: "n5", RaftAddress: "mem-n5", Region: "c", Status: mesh.StatusAlive, Since: time.Now(), Draining: true})
	waitServers(t, leader, "n1:voter", "n2:voter", "n3:voter", "n4:voter", "n5:nonvoter")
	if got, want := wanted(), (consensusInfoWanted{4, 5, true}); got != want {
		t.Fatalf("during the drain: voters, wanted, auto = %v; want %v", got, want)
	}
	// It left longer than the grace ago: four gateways keep three voters (n4: region b holds
	// two, and it has the highest id).
	m.Set(voters.Peer{ID: "n5", RaftAddress: "mem-n5", Region: "c", Status: mesh.StatusLeft, Since: time.Now().Add(-2 * voters.DefaultDeadVoterGrace), Draining: true})
	waitServers(t, leader, "n1:voter", "n2:voter", "n3:voter", "n4:nonvoter")
	if got, want := wanted(), (consensusInfoWanted{3, 3, true}); got != want {
		t.Fatalf("after the drain: voters, wanted, auto = %v; want %v", got, want)
	}
}

// consensusInfoWanted is what Info says of the voters.
type consensusInfoWanted struct {
	voters, wanted int
	auto           bool
}

// TestVotersFleetStoppedOneAtATime is a fleet of three gateways stopped one at a time with a
// plain SIGTERM, which leaves the mesh without a drain, the leader last: the two followers
// started again on their state directories elect a leader among the configuration's voters,
// since the leader kept their seats (voters rule 3: a voter that left without a drain is one
// that died). It was a configuration of the leader alone, which the two could not elect in.
func TestVotersFleetStoppedOneAtATime(t *testing.T) {
	m := voterstest.NewMembership()
	set := func(id string, status mesh.Status, since time.Time) {
		m.Set(voters.Peer{ID: id, RaftAddress: "mem-" + id, Region: "a", Status: status, Since: since})
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		set(id, mesh.StatusAlive, time.Now())
	}
	// The automatic count, with a short reconcile interval: a test can wait for a pass that
	// started after the membership changed (passes).
	newVoters := func() *lateVoters {
		return newLateVoters(voters.Config{Membership: m, ReconcileInterval: 20 * time.Millisecond, Logger: testkit.Quiet()})
	}
	rs := []*lateVoters{newVoters(), newVoters(), newVoters()}
	c := startJoiningClusterWith(t, rs, "a", "a", "a")
	leader := c.nodes[0]
	waitReady(t, leader)
	waitServers(t, leader, "n1:voter", "n2:voter", "n3:voter")
	res, err := leader.Apply(t.Context(), fsm.Register{Spec: spec(t, 8103), Owner: leader.ID()})
	if err != nil {
		t.Fatal(err)
	}
	waitApplied(t, c.nodes, res.Index)
	// passes waits for a pass of r that started after the call: the one running then ends
	// first.
	passes := func(r *lateVoters, what string) {
		t.Helper()
		before := r.Passes()
		testkit.For(t, what, func() bool { return r.Passes() > before+1 })
	}

	// n2, then n3: each leaves the mesh and stops. The leader keeps their seats.
	for _, i := range []int{1, 2} {
		n := c.nodes[i]
		set(n.ID(), mesh.StatusLeft, time.Now())
		passes(rs[0], "a pass of n1's after "+n.ID()+" left")
		if got, want := serversOf(t, leader), []string{"n1:voter", "n2:voter", "n3:voter"}; !slices.Equal(got, want) {
			t.Errorf("after %s left without a drain the configuration is %v; want %v", n.ID(), got, want)
		}
		if err := n.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	// Then n1, the leader.
	set("n1", mesh.StatusLeft, time.Now())
	if err := leader.Shutdown(); err != nil {
		t.Fatal(err)
	}

	// n2 and n3 start again on their state directories, on new transports at their addresses.
	for _, i := range []int{1, 2} {
		old := c.nodes[i]
		addr, trans := raft.NewInmemTransport(raft.ServerAddress("mem-" + old.ID()))
		c.trans[i], c.byAddr[addr] = trans, trans
		rs[i] = newVoters()
		c.nodes[i] = startNode(t, Config{NodeID: old.ID(), StateDir: old.cfg.StateDir, Transport: trans,
			Registerer: prometheus.NewRegistry(), Tune: clusterRaft, LeaderLoop: rs[i].loop.Run})
		rs[i].bind(t, c.nodes[i])
		set(old.ID(), mesh.StatusAlive, time.Now())
	}
	c.trans[1].Connect(c.trans[2].LocalAddr(), c.trans[2])
	c.trans[2].Connect(c.trans[1].LocalAddr(), c.trans[1])
	lead := c.waitLeader(t, 1, 2)
	n, r := c.nodes[lead], rs[lead]
	passes(r, "a pass of the new leader's")
	if got, want := serversOf(t, n), []string{"n1:voter", "n2:voter", "n3:voter"}; !slices.Equal(got, want) {
		t.Fatalf("the new leader's configuration is %v; want %v", got, want)
	}
	res, err = n.Apply(t.Context(), fsm.Register{Spec: spec(t, 8104), Owner: n.ID()})
	if err != nil {
		t.Fatalf("a write with two voters of three back: %v", err)
	}
	waitApplied(t, []*Node{c.nodes[1], c.nodes[2]}, res.Index)

	// n1 stays away past the grace: nobody can take its seat, so it keeps it (rule 7).
	set("n1", mesh.StatusLeft, time.Now().Add(-2*voters.DefaultDeadVoterGrace))
	passes(r, "a pass of the new leader's after the grace")
	if got, want := serversOf(t, n), []string{"n1:voter", "n2:voter", "n3:voter"}; !slices.Equal(got, want) {
		t.Fatalf("past the grace the configuration is %v; want %v", got, want)
	}
}
