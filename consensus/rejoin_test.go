package consensus

import (
	"testing"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/test/testkit"
)

// TestRejoining: a node that waits for a leader without raft state starts rejoining and ends it
// with Rejoined; a node that bootstraps itself does not; a node with raft state restarts with
// the flag it stored (a restart halfway through catching up keeps refusing votes), and keeps
// its incarnation.
func TestRejoining(t *testing.T) {
	c := startWaiting(t, 1, func(_ int, cfg *Config) { cfg.Join = []string{"127.0.0.1:1"} })
	joiner := c.nodes[0]
	if !joiner.Rejoining() || joiner.Incarnation() == "" {
		t.Fatalf("a joining node without state: rejoining %v, incarnation %q", joiner.Rejoining(), joiner.Incarnation())
	}
	if err := joiner.Rejoined("test"); err != nil || joiner.Rejoining() {
		t.Fatalf("after Rejoined: rejoining %v, err %v", joiner.Rejoining(), err)
	}

	dir, err := storage.PrepareNodeDir(t.TempDir(), "n1", testkit.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeID: "n1", BindAddr: "127.0.0.1:0", StateDir: dir.Path}
	writeAndStop(t, cfg, fsm.Register{Spec: spec(t, 8001), Owner: "n1"}) // bootstrapped: not rejoining
	db, err := storage.Open(dir.RaftDB(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inc := db.Incarnation()
	if on, _ := db.Rejoining(); on {
		t.Fatal("a node that bootstrapped itself stored rejoining")
	}
	if err := db.SetRejoining(true); err != nil { // as if it had stopped halfway through catching up
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Tune, cfg.Join = noElection, []string{"127.0.0.1:1"}
	n := startNode(t, cfg)
	if !n.Rejoining() || n.Incarnation() != inc {
		t.Fatalf("restarted with raft state: rejoining %v (want true), incarnation %q (want %q)", n.Rejoining(), n.Incarnation(), inc)
	}
	if err := n.Rejoined("test"); err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if again := startNode(t, cfg); again.Rejoining() {
		t.Error("Rejoined did not last across a restart")
	}
}
