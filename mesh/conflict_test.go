package mesh

import (
	"errors"
	"log/slog"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/meshgw/meshgw/test/logbuf"
)

// slowReap keeps a dead node in memberlist's list for as long as a LAN's default, so that a
// test sees whether a name is given back before memberlist forgets the node it belonged to.
func slowReap(c *memberlist.Config) {
	fastTimers(c)
	c.GossipToTheDeadTime = memberlist.DefaultLANConfig().GossipToTheDeadTime
}

// aliveAt is the condition that id is listed alive at addr.
func aliveAt(id, addr string) func([]Member) bool {
	return func(ms []Member) bool {
		for _, m := range ms {
			if m.ID == id {
				return m.Status == StatusAlive && m.Address == addr
			}
		}
		return false
	}
}

// TestJoinWithATakenNodeID: a node that joins with the id of a live node at another address
// gets a *NodeIDTakenError naming that address, while the live node stays listed alive at its
// own address, and never has to defend its name. (It may log memberlist's "Conflicting address"
// once: the ping that finds it alive carries the other's alive message.)
func TestJoinWithATakenNodeID(t *testing.T) {
	n2Logs, ownLogs := new(logbuf.Buffer), new(logbuf.Buffer)
	started := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	nodes, _ := cluster(t, 2, func(i int, c *Config) {
		if i == 1 {
			c.Logger, c.Meta.Started = n2Logs.Logger(slog.LevelDebug), started
		}
	})
	for _, n := range nodes {
		waitFor(t, n, "both alive", allAlive("n1", "n2"))
	}
	dup := start(t, testConfig("n2", ownLogs))
	n, err := dup.Join([]string{nodes[0].Addr()})
	var taken *NodeIDTakenError
	if !errors.As(err, &taken) || taken.NodeID != "n2" || taken.Addr != nodes[1].Addr() || !taken.Started.Equal(started) {
		t.Fatalf("Join with a taken id: %d, %v (%+v); want a *NodeIDTakenError naming n2 at %s, started %v", n, err, taken, nodes[1].Addr(), started)
	}
	if got := ownLogs.Lines(`msg="mesh joined"`); len(got) != 0 {
		t.Errorf("the duplicate logged its join: %q", got)
	}
	_ = dup.Shutdown()
	for _, n := range nodes {
		waitFor(t, n, "n2 alive at its own address", aliveAt("n2", nodes[1].Addr()))
	}
	if got := n2Logs.Lines("Refuting"); len(got) != 0 {
		t.Errorf("the live n2 had to defend its name: %q", got)
	}
}

// TestNodeIDTakenBackByItsGateway: a node whose previous run is gone, whatever the way, joins
// with its id again, at its old address or a new one, and its peers list it alive at the
// address it has now, within seconds (not once memberlist forgets the dead node, 30 s on a
// LAN).
func TestNodeIDTakenBackByItsGateway(t *testing.T) {
	tests := []struct {
		name     string
		samePort bool
		// gone ends the previous run; it returns once the peer saw what it should have.
		gone func(t *testing.T, seed, old *Mesh)
	}{
		{"same address after a crash", true, func(t *testing.T, seed, old *Mesh) {
			_ = old.Shutdown()
			waitFor(t, seed, "n2 dead", func(ms []Member) bool { s, _ := statusIn(ms, "n2"); return s == StatusDead })
		}},
		{"new address after a crash", false, func(t *testing.T, seed, old *Mesh) {
			_ = old.Shutdown()
			waitFor(t, seed, "n2 dead", func(ms []Member) bool { s, _ := statusIn(ms, "n2"); return s == StatusDead })
		}},
		{"new address after a leave", false, func(t *testing.T, seed, old *Mesh) {
			if err := old.Leave(time.Second); err != nil {
				t.Fatal(err)
			}
			_ = old.Shutdown()
			waitFor(t, seed, "n2 left", func(ms []Member) bool { s, _ := statusIn(ms, "n2"); return s == StatusLeft })
		}},
		{"new address after a crash its peers have not seen yet", false, func(_ *testing.T, _, old *Mesh) {
			_ = old.Shutdown()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, buf := cluster(t, 2, func(_ int, c *Config) { c.Tune = slowReap })
			seed, old := nodes[0], nodes[1]
			waitFor(t, seed, "both alive", allAlive("n1", "n2"))
			cfg := testConfig("n2", buf)
			cfg.Tune = slowReap
			if tt.samePort {
				cfg.BindPort = portOf(t, old.Addr())
			}
			tt.gone(t, seed, old)
			again := start(t, cfg)
			if _, err := again.Join([]string{seed.Addr()}); err != nil {
				t.Fatalf("joining again: %v", err)
			}
			waitFor(t, seed, "n2 alive at "+again.Addr(), aliveAt("n2", again.Addr()))
			waitFor(t, again, "n1 and n2 alive", allAlive("n1", "n2"))
		})
	}
}

// noProbes keeps a node from probing its peers, so that whatever it lists alive stays listed
// alive throughout the test: a crash goes unnoticed, as within any profile's failure detection.
func noProbes(c *memberlist.Config) {
	fastTimers(c)
	c.ProbeInterval = time.Hour
}

// TestNodeIDClaimedAtAnAddressOfThisNode: a node restarted with another advertised address,
// bound to every interface of a host that still has its old address, answers its own ping
// there: Join cannot tell it from another process, and says which bind the address reaches,
// for the caller to tell. (On Linux every 127.0.0.0/8 address reaches a socket bound to
// 0.0.0.0; every address of the test is one of those.)
func TestNodeIDClaimedAtAnAddressOfThisNode(t *testing.T) {
	seedCfg := testConfig("n1", nil)
	seedCfg.Tune = noProbes // n1 lists n2's previous run alive at its old address throughout
	seed := start(t, seedCfg)
	oldCfg := testConfig("n2", nil)
	oldCfg.BindAddr = "127.0.0.2"
	old := start(t, oldCfg)
	if _, err := old.Join([]string{seed.Addr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, seed, "n2 alive at "+old.Addr(), aliveAt("n2", old.Addr()))
	_ = old.Shutdown() // a crash: no leave

	cfg := testConfig("n2", nil)
	cfg.BindAddr, cfg.BindPort, cfg.AdvertiseAddr = "0.0.0.0", portOf(t, old.Addr()), "127.0.0.1"
	port := strconv.Itoa(cfg.BindPort)
	again := start(t, cfg)
	n, err := again.Join([]string{seed.Addr()})
	var taken *NodeIDTakenError
	if n != 1 || !errors.As(err, &taken) || taken.Addr != old.Addr() {
		t.Fatalf("Join: %d, %v; want 1 and a *NodeIDTakenError naming %s, which this node answers", n, err, old.Addr())
	}
	for bind, want := range map[string]bool{"0.0.0.0:" + port: true, "127.0.0.2:" + port: true, "127.0.0.1:" + port: false} {
		if got := taken.ReachesBind(bind); got != want {
			t.Errorf("ReachesBind(%s) = %v, want %v", bind, got, want)
		}
	}
}

// TestReachesBind: a claim's address reaches a socket of the same port bound to that IP, or
// bound to an unspecified address when the IP is one of this host's.
func TestReachesBind(t *testing.T) {
	local := func(ip netip.Addr) bool { return ip.IsLoopback() || ip == netip.MustParseAddr("10.0.0.2") }
	tests := []struct {
		name, bind, addr string
		want             bool
	}{
		{"every interface, another address of this host", "0.0.0.0:39527", "10.0.0.2:39527", true},
		{"every interface, a loopback address", "0.0.0.0:39527", "127.0.0.2:39527", true},
		{"every IPv6 interface, an IPv4 address of this host", "[::]:39527", "10.0.0.2:39527", true},
		{"every interface, an address of another host", "0.0.0.0:39527", "10.0.0.3:39527", false},
		{"every interface, another port", "0.0.0.0:39527", "10.0.0.2:39528", false},
		{"that address", "10.0.0.2:39527", "10.0.0.2:39527", true},
		{"that address, IPv4 in IPv6", "10.0.0.2:39527", "[::ffff:10.0.0.2]:39527", true},
		{"another address of this host", "127.0.0.1:39527", "10.0.0.2:39527", false},
		{"not an address", "0.0.0.0:39527", "gw2:39527", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := reaches(tt.bind, tt.addr, local); got != tt.want {
				t.Errorf("reaches(%s, %s) = %v, want %v", tt.bind, tt.addr, got, tt.want)
			}
		})
	}
}

// stallOnce is the PingDelegate of a node whose process stalls (a pause, a starved CPU) when
// it next answers a ping after arm: it answers that ping, and every message that arrived
// meanwhile, once the stall is over.
type stallOnce struct {
	armed atomic.Int64 // the stall, in nanoseconds; 0: none
}

func (s *stallOnce) arm(d time.Duration) { s.armed.Store(int64(d)) }

func (s *stallOnce) AckPayload() []byte {
	if d := s.armed.Swap(0); d > 0 {
		<-time.After(time.Duration(d)) // the stall itself, on memberlist's packet handler
	}
	return nil
}

func (s *stallOnce) NotifyPingComplete(*memberlist.Node, time.Duration, []byte) {}

// TestStalledDuplicateIsStillLive: a live node that stalls for 1.5 s (a pause, a starved CPU)
// while a second node of its id joins is found live all the same, and the join is refused: a
// ping it answers late is not the silence of a crashed process. (The pings once waited 1 s.)
func TestStalledDuplicateIsStillLive(t *testing.T) {
	stall := &stallOnce{}
	nodes, _ := cluster(t, 2, func(i int, c *Config) {
		c.Tune = noProbes // n1 does not declare n2 dead during the stall
		if i == 1 {
			c.Tune = func(c *memberlist.Config) { noProbes(c); c.Ping = stall }
		}
	})
	waitFor(t, nodes[0], "both alive", allAlive("n1", "n2"))
	dup := start(t, testConfig("n2", nil))
	stall.arm(1500 * time.Millisecond)
	began := time.Now()
	_, err := dup.Join([]string{nodes[0].Addr()})
	var taken *NodeIDTakenError
	if !errors.As(err, &taken) || taken.Addr != nodes[1].Addr() {
		t.Fatalf("Join with the id of a node stalled for 1.5 s: %v after %v; want a *NodeIDTakenError naming %s",
			err, time.Since(began).Round(time.Millisecond), nodes[1].Addr())
	}
}
