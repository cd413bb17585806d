package server

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/meshgw/meshgw/discovery/kube"
	"github.com/meshgw/meshgw/gateway"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/fakekube"
	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/loopport"
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
	a, bDir := twoClusters(t)

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

// ran reports whether g's Run has returned (without taking its result, which stop reads).
func (g *testGateway) ran() bool { return len(g.done) > 0 }

// result is what g's Run returned, once it has; stop still reads it.
func (g *testGateway) result() error {
	err := <-g.done
	g.done <- err
	return err
}

// joinedOrEnded is the condition that g logged its mesh join, or that its Run returned.
func joinedOrEnded(g *testGateway, joined string) func() bool {
	return func() bool { return len(g.logs.Lines(joined)) > 0 || g.ran() }
}

// freeMeshPort is a port free on ip for TCP and UDP when the test looked, for gateways that
// share one --mesh-port on several addresses (as pods do).
func freeMeshPort(t *testing.T, ip string) int {
	t.Helper()
	ln, err := mesh.Listen(ip, 0, testkit.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr())
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return p
}

// TestJoinAfterARestartWithAnotherAdvertisedHost: a gateway whose mesh binds every interface,
// restarted after a crash with another --mesh-advertise-host on a host that still has the
// address it advertised before, joins: the old address its peers list answers the id's ping,
// but it is this gateway that answers there, not a second one. (Every address here is on
// 127.0.0.0/8, which reaches a socket bound to 0.0.0.0 on Linux: the traffic stays on loopback.)
func TestJoinAfterARestartWithAnotherAdvertisedHost(t *testing.T) {
	quiet, key := testkit.Quiet(), gossipKey(&Config{Gateway: gateway.Config{AdminAPIKey: adminKey}})
	// The peer: it does not probe, so it lists the crashed run alive, as peers do until they
	// notice a crash.
	seed, err := mesh.Start(mesh.Config{NodeID: "gw-1", BindAddr: "127.0.0.1", Profile: mesh.ProfileLocal, EncryptKey: key,
		Logger: quiet, Tune: func(c *memberlist.Config) { c.ProbeInterval = time.Hour }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = seed.Shutdown() }) // after gw-2 stopped
	old, err := mesh.Start(mesh.Config{NodeID: "gw-2", BindAddr: "127.0.0.2", Profile: mesh.ProfileLocal, EncryptKey: key, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Join([]string{seed.Addr()}); err != nil {
		t.Fatal(err)
	}
	testkit.For(t, "gw-1 to list gw-2 alive at "+old.Addr(), func() bool {
		for _, m := range seed.Members() {
			if m.ID == "gw-2" {
				return m.Status == mesh.StatusAlive && m.Address == old.Addr()
			}
		}
		return false
	})
	_ = old.Shutdown() // the crash: no leave

	_, port, _ := net.SplitHostPort(old.Addr())
	g := startGateway(t, func(c *Config) {
		c.NodeID, c.Cluster.Join = "gw-2", []string{seed.Addr()}
		c.Cluster.MeshBind, c.Cluster.MeshAdvertise = "0.0.0.0", "127.0.0.1"
		c.Cluster.MeshPort, _ = strconv.Atoi(port)
	})
	testkit.For(t, "gw-2 to join or to stop", joinedOrEnded(g, "joined the mesh"))
	if g.ran() {
		t.Fatalf("gw-2, restarted at %s, stopped: %v", g.cl.mesh.Addr(), g.result())
	}
	if got := g.logs.Lines("where this gateway answers itself", "listed_at="+old.Addr()); len(got) != 1 {
		t.Errorf("want one line saying that gw-2 itself answers at %s: %q", old.Addr(), g.logs.Lines("node id"))
	}
}

// TestTakenIDUnderRouterSelectorKeepsTheFirstGateway: with --router-selector, the gateway that
// holds a node id goes on when a pod started later with the same id appears, even alone in
// its fleet; the later one stops at its join with the usual line.
func TestTakenIDUnderRouterSelectorKeepsTheFirstGateway(t *testing.T) {
	api := fakekube.New()
	t.Cleanup(api.Close)
	kubeconfig, err := api.WriteKubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	port := freeMeshPort(t, "127.0.0.2")
	pod := func(name, ip string, labels map[string]string) {
		api.Apply(fakekube.ReadyPod("gw", name, ip, labels, time.Now()))
	}
	gw2At := func(ip string, selector map[string]string) func(*Config) {
		return func(c *Config) {
			c.NodeID = "gw-2"
			c.Cluster.MeshBind, c.Cluster.MeshAdvertise, c.Cluster.MeshPort = ip, ip, port
			c.Discovery = &kube.Config{Namespace: "gw", RouterSelector: selector}
		}
	}

	// The gateway that holds gw-2, alone in its fleet.
	pod("first", "127.0.0.2", map[string]string{"app": "meshgw"})
	first := startGateway(t, gw2At("127.0.0.2", map[string]string{"app": "meshgw"}))
	// A pod started later with the same id. It lists no pod but its own for now, so that it is
	// the first gateway's loop that meets it.
	pod("second", "127.0.0.3", map[string]string{"app": "meshgw", "second": "yes"})
	logs := &logbuf.Buffer{}
	cfg := testConfig(t, logs)
	gw2At("127.0.0.3", map[string]string{"second": "yes"})(&cfg)
	second, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	secondDone := make(chan error, 1)
	go func() { secondDone <- second.Run(ctx) }()
	defer func() {
		cancel()
		<-secondDone
	}()

	testkit.For(t, "the first gw-2 to meet the second", joinedOrEnded(first, "127.0.0.3:"+strconv.Itoa(port)))
	// Now the second one lists the first one's pod too: it meets the first gw-2 at its join.
	pod("first", "127.0.0.2", map[string]string{"app": "meshgw", "second": "yes"})
	testkit.For(t, "either gw-2 to stop", func() bool { return len(secondDone) > 0 || first.ran() })
	if first.ran() {
		t.Fatalf("the first gw-2 stopped when a pod started later took its id: %v", first.result())
	}
	got := <-secondDone
	secondDone <- got
	want := "--node-id gw-2 is already used by a live gateway at 127.0.0.2:" + strconv.Itoa(port) + "; give each gateway its own node id"
	if got == nil || got.Error() != want {
		t.Errorf("the second gw-2's Run: %v, want %q", got, want)
	}
	if first.ran() {
		t.Errorf("the first gw-2 stopped: %v", first.result())
	}
	if got := first.logs.Lines("a gateway started after this one uses its node id", "other=127.0.0.3:"); len(got) == 0 {
		t.Errorf("the first gw-2 did not say that the other one stops: %q", first.logs.Lines("node id"))
	}
}

// TestForeignAmongUnreachableRetries: a gateway whose --join names a gateway of another raft
// cluster (an address reused since) and its own peers, none up yet (a whole fleet restarting),
// retries its join: only when every address refused it for its cluster id can trying again not
// help.
func TestForeignAmongUnreachableRetries(t *testing.T) {
	a, bDir := twoClusters(t)
	// gw-b's own peer, not up yet: a port below the ephemeral range (loopport), so that no
	// outgoing connection takes it and turns a refused connect into a join that waits out its
	// timeout (a port from 127.0.0.1:0, closed again, made this test time out 1 run in 5).
	port, err := loopport.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	peerDown := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	g := startGateway(t, durable("gw-b", bDir, a.MeshAddr(), peerDown))
	retries := func() int { return len(g.logs.Lines("joining the mesh failed; retrying")) }
	testkit.For(t, "gw-b to retry twice or to stop", func() bool { return retries() >= 2 || g.ran() })
	if g.ran() {
		t.Fatalf("gw-b stopped at its join instead of retrying: %v", g.result())
	}
	if m, ok := a.cl.member("gw-b"); !ok || m.Status != mesh.StatusForeign {
		t.Errorf("gw-a lists gw-b as %v (listed: %v), want foreign", m.Status, ok)
	}
}

// TestTakenIDYieldsTheLaterGateway: of two live gateways with one node id, the one started later stops; each
// compares the same two start times, so exactly one does. Without the other's start time, the
// one that has not joined yet stops.
func TestTakenIDYieldsTheLaterGateway(t *testing.T) {
	t0 := time.Date(2026, 12, 8, 1, 0, 0, 0, time.UTC)
	const self, other = "10.0.0.1:39527", "10.0.0.2:39527"
	tests := []struct {
		name         string
		started      time.Time // this gateway's
		otherStarted time.Time
		joined       bool
		want         bool
	}{
		{"the other started first", t0.Add(time.Second), t0, true, true},
		{"the other started first, this one alone", t0.Add(time.Second), t0, false, true},
		{"this one started first", t0, t0.Add(time.Second), false, false},
		{"this one started first, joined", t0, t0.Add(time.Second), true, false},
		{"the same instant: the greater address stops", t0, t0, true, false},
		{"other's start unknown, not joined yet", t0, time.Time{}, false, true},
		{"other's start unknown, joined before", t0, time.Time{}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			taken := &mesh.NodeIDTakenError{NodeID: "gw-2", Addr: other, Started: tt.otherStarted}
			if got := yields(taken, tt.started, self, tt.joined); got != tt.want {
				t.Errorf("yields = %v, want %v", got, tt.want)
			}
			if tt.otherStarted.IsZero() {
				return
			}
			// The other gateway's own decision, from the same two start times.
			mine := &mesh.NodeIDTakenError{NodeID: "gw-2", Addr: self, Started: tt.started}
			if theirs := yields(mine, tt.otherStarted, other, true); theirs == tt.want {
				t.Errorf("both gateways decide to stop: %v", theirs)
			}
		})
	}
}

// durable sets a gateway's node id, a state directory (raft on disk) and its --join.
func durable(id, dir string, join ...string) func(*Config) {
	return func(c *Config) { c.NodeID, c.Raft.Ephemeral, c.StateDir, c.Cluster.Join = id, false, dir, join }
}

// twoClusters starts gw-a, a cluster of its own, and returns it with the state directory of
// gw-b, which led another cluster and is stopped: a gateway started on that directory belongs
// to a cluster other than gw-a's.
func twoClusters(t *testing.T) (a *testGateway, bDir string) {
	t.Helper()
	hasClusterID := func(g *testGateway) func() bool { return func() bool { return g.cl.node.ClusterID() != "" } }
	a = startGateway(t, durable("gw-a", t.TempDir()))
	testkit.For(t, "gw-a's cluster id", hasClusterID(a))
	bDir = t.TempDir()
	b := startGateway(t, durable("gw-b", bDir))
	testkit.For(t, "gw-b's cluster id", hasClusterID(b))
	b.stop(t)
	return a, bDir
}
