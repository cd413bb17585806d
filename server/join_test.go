package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/testkit"
)

// runUntilItEnds starts a gateway of cfg and runs it until Run returns by itself, within
// testkit.Deadline; it fails the test if Run has not returned by then (and stops it).
func runUntilItEnds(t *testing.T, cfg Config) error {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(testkit.Deadline):
		cancel()
		<-done
		t.Fatalf("%s still runs after %v", s.NodeID(), testkit.Deadline)
		return nil
	}
}

// TestTakenNodeIDExits: a gateway started with the node id of a live gateway at another address
// stops at its join, and Run returns one line naming the flag and that gateway's address. The
// live gateway is not disturbed: its peers list it alive at its own address throughout, and it
// never has to defend its name.
func TestTakenNodeIDExits(t *testing.T) {
	g1 := startGateway(t, func(c *Config) { c.NodeID = "gw-1" })
	g2 := startGateway(t, func(c *Config) { c.NodeID, c.Cluster.Join = "gw-2", []string{g1.MeshAddr()} })
	aliveAt := func(g *testGateway, id, addr string) func() bool {
		return func() bool { m, ok := g.cl.member(id); return ok && m.Status == mesh.StatusAlive && m.Address == addr }
	}
	testkit.For(t, "gw-1 to list gw-2 alive", aliveAt(g1, "gw-2", g2.MeshAddr()))

	logs := &logbuf.Buffer{}
	cfg := testConfig(t, logs)
	cfg.NodeID, cfg.Cluster.Join = "gw-2", []string{g1.MeshAddr()}
	err := runUntilItEnds(t, cfg)
	want := "--node-id gw-2 is already used by a live gateway at " + g2.MeshAddr() + "; give each gateway its own node id"
	if err == nil || err.Error() != want {
		t.Errorf("Run: %v, want %q", err, want)
	}
	if t.Failed() {
		t.Logf("logs of the second gw-2:\n%s", logs.String())
	}
	if !aliveAt(g1, "gw-2", g2.MeshAddr())() {
		m, _ := g1.cl.member("gw-2")
		t.Errorf("gw-1 lists gw-2 as %s at %s, want alive at %s", m.Status, m.Address, g2.MeshAddr())
	}
	for _, line := range []string{"Refuting", "mesh peer failed", "mesh peer left"} {
		for _, g := range []*testGateway{g1, g2} {
			if got := g.logs.Lines(line); len(got) != 0 {
				t.Errorf("%s logged %q", g.NodeID(), got)
			}
		}
	}
}

// TestJoinAnHTTPPortHints: a --join that names a gateway's HTTP port instead of its mesh port
// fails at each try with a line that says what --join takes. (With gossip encrypted, the HTTP
// server may wait for the rest of a request line rather than answer: mesh's
// TestJoinWhatIsNotAMeshPort covers the answer it gives when it does.)
func TestJoinAnHTTPPortHints(t *testing.T) {
	plaintext := func(c *Config) { c.Gateway.AdminAPIKey = "" }
	target := startGateway(t, plaintext)
	g := startGateway(t, func(c *Config) { plaintext(c); c.Cluster.Join = []string{target.Addr()} })
	testkit.For(t, "a failed join", func() bool { return len(g.logs.Lines("joining the mesh failed")) > 0 })
	hint := "check --join: it takes a gateway's mesh address (its --mesh-port), not its HTTP port"
	if got := g.logs.Lines("joining the mesh failed", hint); len(got) == 0 {
		t.Errorf("no line with %q: %q", hint, g.logs.Lines("joining the mesh failed"))
	}
}

// TestForeignClusterExits: a gateway whose state directory belongs to another raft cluster than
// the gateways it joins stops with one line that says so, rather than retrying for ever while
// it leads a cluster of its own: a cluster id never changes.
func TestForeignClusterExits(t *testing.T) {
	durable := func(id, dir string, join ...string) func(*Config) {
		return func(c *Config) { c.NodeID, c.Raft.Ephemeral, c.StateDir, c.Cluster.Join = id, false, dir, join }
	}
	hasClusterID := func(g *testGateway) func() bool { return func() bool { return g.cl.node.ClusterID() != "" } }
	a := startGateway(t, durable("gw-a", t.TempDir()))
	testkit.For(t, "gw-a's cluster id", hasClusterID(a))
	bDir := t.TempDir()
	b := startGateway(t, durable("gw-b", bDir))
	testkit.For(t, "gw-b's cluster id", hasClusterID(b))
	b.stop(t)

	logs := &logbuf.Buffer{}
	cfg := testConfig(t, logs)
	durable("gw-b", bDir, a.MeshAddr())(&cfg)
	err := runUntilItEnds(t, cfg)
	if err == nil || !strings.Contains(err.Error(), "check --join "+a.MeshAddr()+": these peers belong to another raft cluster") {
		t.Errorf("Run: %v, want the foreign cluster's error", err)
	}
	if m, ok := a.cl.member("gw-b"); !ok || m.Status != mesh.StatusForeign {
		t.Errorf("gw-a lists gw-b as %v (listed: %v), want foreign", m.Status, ok)
	}
}
