package consensus

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// Two of three voters are lost for good: the survivor, given a peers.json naming itself alone,
// recovers at its next start, leads, serves and takes writes, keeping every record; the file is
// renamed so that a later start does not recover again.
func TestRecoverFromPeersFile(t *testing.T) {
	dirs := make([]string, 3)
	for i := range dirs {
		d, err := storage.PrepareNodeDir(t.TempDir(), fmt.Sprintf("n%d", i+1), testkit.Quiet())
		if err != nil {
			t.Fatal(err)
		}
		dirs[i] = d.Path
	}
	onDisk := func(i int, c *Config) { c.Ephemeral, c.StateDir = false, dirs[i] }
	c := startClusterWith(t, 3, onDisk)
	lead := c.waitLeader(t, 0, 1, 2)
	var rec worker.ID
	for _, port := range []int{8001, 8002} {
		res, err := c.nodes[lead].Apply(context.Background(), fsm.Register{Spec: spec(t, port), Owner: "n1", At: time.Unix(1, 0)})
		if err != nil {
			t.Fatal(err)
		}
		rec = res.Record.ID
	}
	testkit.For(t, "n1 applied both", func() bool { _, ok := c.nodes[0].Worker(rec); return ok })
	want := c.nodes[0].Workers()
	for _, n := range c.nodes {
		crash(t, n)
	}

	peers := filepath.Join(dirs[0], PeersFile)
	if err := os.WriteFile(peers, []byte(`[{"id": "n1", "address": "mem-n1"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("mem-n1")
	n := startNode(t, Config{NodeID: "n1", StateDir: dirs[0], Transport: trans})
	testkit.For(t, "the survivor to lead alone", n.IsLeader)
	if diff := cmp.Diff(want, n.Workers()); diff != "" {
		t.Fatalf("records after the recovery (-want +got):\n%s", diff)
	}
	if _, err := n.Apply(context.Background(), fsm.Register{Spec: spec(t, 8003), Owner: "n1", At: time.Unix(2, 0)}); err != nil {
		t.Fatalf("a write after the recovery: %v", err)
	}
	if _, err := os.Stat(peers); !os.IsNotExist(err) {
		t.Fatalf("%s is still there after the recovery (%v)", PeersFile, err)
	}
	if _, err := os.Stat(peers + ".applied"); err != nil {
		t.Fatal(err)
	}
}

// A peers.json that is not a list of servers with ids, addresses and a voter stops the start
// with one line naming the file.
func TestBadPeersFile(t *testing.T) {
	for _, body := range []string{`{}`, `[]`, `[{"id": "n1"}]`, `[{"id": "n1", "address": "a", "non_voter": true}]`,
		`[{"id": "n1", "address": "a"}, {"id": "n1", "address": "b"}]`} {
		path := filepath.Join(t.TempDir(), PeersFile)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readPeersFile(path); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
}
