package mesh

import (
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshgw/meshgw/test/logbuf"
)

// TestJoinSeesAllAliveWithMeta: four nodes joined to the first all see each other alive, with
// the metadata each published.
func TestJoinSeesAllAliveWithMeta(t *testing.T) {
	nodes, _ := cluster(t, 4, func(i int, c *Config) {
		c.Meta.OwnedWorkers = uint32(10 * i)
		c.Meta.Region = []string{"eu", "us", "eu", "ap"}[i]
	})
	ids := []string{"n1", "n2", "n3", "n4"}
	for _, n := range nodes {
		waitFor(t, n, "all four alive", allAlive(ids...))
	}
	for _, n := range nodes {
		if c := n.Count(StatusAlive); c != 4 {
			t.Errorf("%s counts %d alive", n.ID(), c)
		}
	}
	want := make([]Meta, len(nodes))
	for i, n := range nodes {
		want[i] = n.Local()
	}
	for _, n := range nodes {
		ms := n.Members()
		got := make([]Meta, len(ms))
		for i, m := range ms {
			got[i] = m.Meta
			if m.Address != nodes[i].Addr() {
				t.Errorf("%s lists %s at %s, want %s", n.ID(), m.ID, m.Address, nodes[i].Addr())
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s sees metadata (-want +got):\n%s", n.ID(), diff)
		}
	}
	if want[3].Region != "ap" || want[3].OwnedWorkers != 30 || want[3].NodeID != "n4" {
		t.Errorf("n4 publishes %+v", want[3])
	}
}

// TestJoinPastAPeerThatDoesNotAnswer: a join whose first address accepts connections and never
// answers (a peer that hangs, or a host whose SYNs are answered but nothing more) still makes
// the node a member through the next address at once, not after the first one's TCP timeout
// (docs/chaos.md: a gateway started again while one of its --join peers was cut off was seen
// alive 5 s late).
func TestJoinPastAPeerThatDoesNotAnswer(t *testing.T) {
	hung, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: connects, then silence
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	seed := start(t, testConfig("n1", nil))
	cfg := testConfig("n2", nil)
	cfg.Tune = func(c *memberlist.Config) { fastTimers(c); c.TCPTimeout = 5 * time.Second }
	joiner := start(t, cfg)
	joined := make(chan error, 1)
	go func() { _, err := joiner.Join([]string{hung.Addr().String(), seed.Addr()}); joined <- err }()
	begin := time.Now()
	waitFor(t, seed, "n2 alive", allAlive("n1", "n2"))
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("n1 saw n2 alive after %v: the join waited for the address that does not answer", took)
	}
	if err := <-joined; err != nil {
		t.Errorf("join: %v", err)
	}
}

func TestSetMetaPropagates(t *testing.T) {
	nodes, _ := cluster(t, 3, nil)
	for _, n := range nodes {
		waitFor(t, n, "all alive", allAlive("n1", "n2", "n3"))
	}
	ch, stop := nodes[2].Watch()
	defer stop()
	if err := nodes[0].SetMeta(func(m *Meta) { m.AppliedIndex, m.OwnedWorkers, m.Color = 42, 7, "green" }); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitFor(t, n, "n1's new metadata", func(ms []Member) bool {
			m := ms[0].Meta
			return m.AppliedIndex == 42 && m.OwnedWorkers == 7 && m.Color == "green" && ms[0].Status == StatusAlive
		})
	}
	select {
	case <-ch:
	default:
		t.Error("n3's watch was not signalled by n1's metadata update")
	}
	// Refused changes leave the metadata as it was.
	for name, f := range map[string]func(*Meta){
		"node id": func(m *Meta) { m.NodeID = "other" },
		"leaving": func(m *Meta) { m.Leaving = true },
		"size": func(m *Meta) {
			m.Region, m.Color, m.Version = strings.Repeat("r", 200), strings.Repeat("c", 200), strings.Repeat("v", 200)
		},
	} {
		if err := nodes[0].SetMeta(f); err == nil {
			t.Errorf("SetMeta changing the %s succeeded", name)
		}
	}
	if got := nodes[0].Local(); got.AppliedIndex != 42 || got.Region != "r1" || got.Leaving {
		t.Errorf("after refused updates n1 publishes %+v", got)
	}
	if err := nodes[0].SetMeta(func(*Meta) {}); err != nil {
		t.Errorf("a SetMeta that changes nothing: %v", err)
	}
}

func TestLeaveIsLeft(t *testing.T) {
	nodes, _ := cluster(t, 3, nil)
	for _, n := range nodes {
		waitFor(t, n, "all alive", allAlive("n1", "n2", "n3"))
	}
	if err := nodes[2].Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := nodes[2].Leave(time.Second); err != nil {
		t.Errorf("a second Leave: %v", err)
	}
	if err := nodes[2].SetMeta(func(m *Meta) { m.AppliedIndex++ }); !errors.Is(err, ErrLeft) {
		t.Errorf("SetMeta after Leave: %v, want ErrLeft", err)
	}
	if _, err := nodes[2].Join([]string{nodes[0].Addr()}); !errors.Is(err, ErrLeft) {
		t.Errorf("Join after Leave: %v, want ErrLeft", err)
	}
	if s, _ := statusIn(nodes[2].Members(), "n3"); s != StatusLeft {
		t.Errorf("n3 sees itself %s, want left", s)
	}
	_ = nodes[2].Shutdown()
	for _, n := range nodes[:2] {
		waitFor(t, n, "n3 left", func(ms []Member) bool {
			s, ok := statusIn(ms, "n3")
			return ok && s == StatusLeft
		})
	}
}

func TestCrashIsDead(t *testing.T) {
	nodes, buf := cluster(t, 3, nil)
	for _, n := range nodes {
		waitFor(t, n, "all alive", allAlive("n1", "n2", "n3"))
	}
	if err := nodes[1].Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[1].Shutdown(); err != nil {
		t.Errorf("a second Shutdown: %v", err)
	}
	for _, n := range []*Mesh{nodes[0], nodes[2]} {
		waitFor(t, n, "n2 dead", func(ms []Member) bool {
			s, ok := statusIn(ms, "n2")
			return ok && s == StatusDead
		})
	}
	if len(buf.Lines("mesh peer failed", "peer=n2")) == 0 {
		t.Error("no log line for n2's failure")
	}
	for name, err := range map[string]error{
		"Leave":   nodes[1].Leave(time.Second),
		"SetMeta": nodes[1].SetMeta(func(m *Meta) { m.AppliedIndex++ }),
	} {
		if !errors.Is(err, ErrShutdown) {
			t.Errorf("%s after Shutdown: %v, want ErrShutdown", name, err)
		}
	}
	if _, err := nodes[1].Join([]string{nodes[0].Addr()}); !errors.Is(err, ErrShutdown) {
		t.Errorf("Join after Shutdown: %v, want ErrShutdown", err)
	}
}

func TestOtherKeyCannotJoin(t *testing.T) {
	const key1, key2 = "MTIzNDU2Nzg5MDEyMzQ1Ng==", "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXowMTIzNDU="
	nodes, buf := cluster(t, 2, func(_ int, c *Config) { c.EncryptKey = key1 })
	for _, n := range nodes {
		waitFor(t, n, "both alive", allAlive("n1", "n2"))
	}
	other := testConfig("x1", buf)
	other.EncryptKey = key2
	x := start(t, other)
	if n, err := x.Join([]string{nodes[0].Addr()}); err == nil || n != 0 {
		t.Fatalf("a node with another key joined: %d, %v", n, err)
	}
	plain := start(t, testConfig("x2", buf))
	if n, err := plain.Join([]string{nodes[0].Addr()}); err == nil || n != 0 {
		t.Fatalf("a node without a key joined: %d, %v", n, err)
	}
	for _, n := range []*Mesh{x, plain} {
		if got := summary(n.Members()); len(got) != 1 {
			t.Errorf("%s lists %v", n.ID(), got)
		}
	}
	if got := summary(nodes[0].Members()); len(got) != 2 {
		t.Errorf("n1 lists %v", got)
	}
	for _, key := range []string{key1, key2} {
		if strings.Contains(buf.String(), key) {
			t.Errorf("the log holds the key %s", key)
		}
	}
}

func TestForeignClusterRefused(t *testing.T) {
	buf := new(logbuf.Buffer)
	a1cfg := testConfig("a1", buf)
	a1cfg.Meta.ClusterID = "cluster-a"
	a1 := start(t, a1cfg)
	b1cfg := testConfig("b1", buf)
	b1cfg.Meta.ClusterID = "cluster-b"
	b1 := start(t, b1cfg)

	n, err := b1.Join([]string{a1.Addr()})
	if !errors.Is(err, ErrForeignCluster) || n != 0 {
		t.Fatalf("joining another cluster: %d, %v; want ErrForeignCluster", n, err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the join error spans lines: %q", err)
	}
	isForeignPeer := func(id string) func([]Member) bool {
		return func(ms []Member) bool {
			s, ok := statusIn(ms, id)
			return ok && s == StatusForeign && len(ms) == 2
		}
	}
	waitFor(t, b1, "a1 foreign", isForeignPeer("a1"))
	waitFor(t, a1, "b1 foreign", isForeignPeer("b1"))
	if f, a := a1.Count(StatusForeign), a1.Count(StatusAlive); f != 1 || a != 1 {
		t.Errorf("a1 counts %d foreign and %d alive, want 1 and 1", f, a)
	}

	// A fresh node (no cluster id yet) is accepted; once it takes another cluster's id, its
	// peers list it as foreign and it lists them so.
	fresh := start(t, testConfig("f1", buf))
	if _, err := fresh.Join([]string{a1.Addr()}); err != nil {
		t.Fatalf("a node without a cluster id could not join: %v", err)
	}
	waitFor(t, a1, "f1 alive", func(ms []Member) bool { s, ok := statusIn(ms, "f1"); return ok && s == StatusAlive })
	if err := fresh.SetMeta(func(m *Meta) { m.ClusterID = "cluster-b" }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, a1, "f1 foreign", func(ms []Member) bool { s, ok := statusIn(ms, "f1"); return ok && s == StatusForeign })
	waitFor(t, fresh, "a1 foreign", func(ms []Member) bool { s, ok := statusIn(ms, "a1"); return ok && s == StatusForeign })
	if f := a1.Count(StatusForeign); f != 2 {
		t.Errorf("a1 counts %d foreign, want 2 (b1 and f1)", f)
	}
	for _, m := range a1.Members() {
		if m.ID == "f1" && m.Meta.ClusterID != "cluster-b" {
			t.Errorf("a1 lists f1 with cluster id %q, want the one it announced", m.Meta.ClusterID)
		}
	}
	// f1 keeps announcing itself to a1, which logs its refusal once.
	if got := buf.Lines("mesh peer refused", "peer=f1"); len(got) != 1 {
		t.Errorf("%d lines on refusing f1, want 1: %q", len(got), got)
	}
}

func TestMetricsCountMembers(t *testing.T) {
	reg := prometheus.NewRegistry()
	nodes, _ := cluster(t, 3, func(i int, c *Config) {
		if i == 0 {
			c.Registerer = reg
		}
	})
	waitFor(t, nodes[0], "all alive", allAlive("n1", "n2", "n3"))
	_ = nodes[2].Shutdown()
	waitFor(t, nodes[0], "n3 dead", func(ms []Member) bool { s, _ := statusIn(ms, "n3"); return s == StatusDead })
	const want = `
# HELP meshgw_mesh_members Members of the mesh as this gateway sees them, itself included, by status.
# TYPE meshgw_mesh_members gauge
meshgw_mesh_members{status="alive"} 2
meshgw_mesh_members{status="dead"} 1
meshgw_mesh_members{status="foreign"} 0
meshgw_mesh_members{status="left"} 0
meshgw_mesh_members{status="suspect"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "meshgw_mesh_members"); err != nil {
		t.Error(err)
	}
	_ = nodes[0].Shutdown()
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("after Shutdown the registry holds %d series (%v)", n, err)
	}
}

func TestWatchStops(t *testing.T) {
	nodes, _ := cluster(t, 1, nil)
	ch, stop := nodes[0].Watch()
	stop()
	if err := nodes[0].SetMeta(func(m *Meta) { m.AppliedIndex = 9 }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Error("a stopped watch was signalled")
	default:
	}
	ms := nodes[0].Members()
	if diff := cmp.Diff([]Member{{ID: "n1", Address: nodes[0].Addr(), Status: StatusAlive, Meta: nodes[0].Local()}}, ms,
		cmpopts.IgnoreFields(Member{}, "Since")); diff != "" {
		t.Errorf("a mesh of one (-want +got):\n%s", diff)
	}
}

// WatchMembership skips a peer's progress (applied index, owned workers), which moves at every
// raft write; Watch does not. A status change reaches both.
func TestWatchMembershipSkipsProgress(t *testing.T) {
	m := &Mesh{name: "a", now: time.Now, table: map[string]*entry{}, foreign: map[string]*entry{},
		watchers: map[chan struct{}]bool{}, log: slog.New(slog.DiscardHandler)}
	all, stopAll := m.Watch()
	defer stopAll()
	members, stopMembers := m.WatchMembership()
	defer stopMembers()
	drain := func() (gotAll, gotMembers bool) {
		select {
		case <-all:
			gotAll = true
		default:
		}
		select {
		case <-members:
			gotMembers = true
		default:
		}
		return
	}
	node := func(meta Meta) *memberlist.Node {
		raw, err := EncodeMeta(meta)
		if err != nil {
			t.Fatal(err)
		}
		return &memberlist.Node{Name: "b", Meta: raw}
	}
	steps := []struct {
		name          string
		ev            event
		meta          Meta
		wantAll, want bool
	}{
		{"join", eventJoin, Meta{NodeID: "b", AppliedIndex: 1}, true, true},
		{"progress only", eventUpdate, Meta{NodeID: "b", AppliedIndex: 9, OwnedWorkers: 3}, true, false},
		{"another region", eventUpdate, Meta{NodeID: "b", AppliedIndex: 9, OwnedWorkers: 3, Region: "eu"}, true, true},
		{"dead", eventLeave, Meta{NodeID: "b", AppliedIndex: 9, OwnedWorkers: 3, Region: "eu"}, true, true},
	}
	for _, st := range steps {
		m.observe(node(st.meta), st.ev)
		if gotAll, got := drain(); gotAll != st.wantAll || got != st.want {
			t.Errorf("%s: Watch signalled %v, WatchMembership %v; want %v, %v", st.name, gotAll, got, st.wantAll, st.want)
		}
	}
}

// TestAddrWhileMetaChanges: the node's address may be read (meshgw logs it at start) while its
// metadata is gossiped anew; under -race, reading it from memberlist's local node raced with
// UpdateNode's write of it.
func TestAddrWhileMetaChanges(t *testing.T) {
	nodes, _ := cluster(t, 1, nil)
	want := nodes[0].Addr()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			_ = nodes[0].SetMeta(func(m *Meta) { m.AppliedIndex = uint64(i) })
		}
	}()
	for range 200 {
		if got := nodes[0].Addr(); got != want {
			t.Fatalf("Addr = %q, want %q", got, want)
		}
	}
	<-done
}
