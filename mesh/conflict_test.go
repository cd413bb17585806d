package mesh

import (
	"errors"
	"log/slog"
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
	nodes, _ := cluster(t, 2, func(i int, c *Config) {
		if i == 1 {
			c.Logger = n2Logs.Logger(slog.LevelDebug)
		}
	})
	for _, n := range nodes {
		waitFor(t, n, "both alive", allAlive("n1", "n2"))
	}
	dup := start(t, testConfig("n2", ownLogs))
	n, err := dup.Join([]string{nodes[0].Addr()})
	var taken *NodeIDTakenError
	if !errors.As(err, &taken) || taken.NodeID != "n2" || taken.Addr != nodes[1].Addr() {
		t.Fatalf("Join with a taken id: %d, %v; want a *NodeIDTakenError naming n2 at %s", n, err, nodes[1].Addr())
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
