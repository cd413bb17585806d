package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/meshgw/meshgw/test/harness"
)

// TestGossipKeyRotationBySIGHUP is docs/security.md's rolling rotation of the gossip key on a
// running cluster: each round rewrites every gateway's --mesh-encrypt-key-file and sends it a
// SIGHUP (new key second; new key first; old key gone). The cluster stays formed, and a gateway
// that only knows the new key then joins it.
func TestGossipKeyRotationBySIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const oldKey, newKey = "MTIzNDU2Nzg5MDEyMzQ1Ng==", "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXowMTIzNDU="
	b := harness.Build(t)
	dir := t.TempDir()
	keyFile := func(id, keys string) string {
		p := filepath.Join(dir, id+".key")
		if err := os.WriteFile(p, []byte(keys+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ga := newClusterGW(t, "ka", "--mesh-encrypt-key-file", keyFile("ka", oldKey))
	gb := newClusterGW(t, "kb", "--mesh-encrypt-key-file", keyFile("kb", oldKey))
	ga.start(t, b)
	gb.start(t, b, ga.meshAddr())
	waitFormed(t, ga, gb)
	for round, keys := range []string{oldKey + "\n" + newKey, newKey + "\n" + oldKey, newKey} {
		for _, g := range []*clusterGW{ga, gb} {
			keyFile(g.id, keys)
			before := strings.Count(g.Output(), "SIGHUP: reloaded the gossip keys")
			if err := g.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			harness.WaitFor(t, clusterBound, g.id+" reloads its gossip keys", func() bool {
				return strings.Count(g.Output(), "SIGHUP: reloaded the gossip keys") > before
			})
		}
		t.Logf("round %d done", round+1)
		waitFormed(t, ga, gb)
	}
	gc := newClusterGW(t, "kc", "--mesh-encrypt-key-file", keyFile("kc", newKey))
	gc.start(t, b, ga.meshAddr())
	waitFormed(t, ga, gb, gc)
	for _, g := range []*clusterGW{ga, gb, gc} {
		for _, k := range []string{oldKey, newKey} {
			if strings.Contains(g.Output(), k) {
				t.Errorf("%s logged a gossip key", g.id)
			}
		}
	}
}
