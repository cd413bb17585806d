package mesh

import (
	"errors"
	"strings"
	"testing"
)

const (
	rotKey1 = "MTIzNDU2Nzg5MDEyMzQ1Ng=="                     // 16 bytes
	rotKey2 = "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXowMTIzNDU=" // 32 bytes
)

// TestKeyRotation is a rolling rotation of the gossip key on a running mesh, in the three
// rounds of SetEncryptKeys: after each round both nodes still hear each other; at the end a
// node with only the new key joins and one with only the old key cannot; no key is logged.
func TestKeyRotation(t *testing.T) {
	nodes, buf := cluster(t, 2, func(_ int, c *Config) { c.EncryptKey = rotKey1 })
	for _, n := range nodes {
		waitFor(t, n, "both alive", allAlive("n1", "n2"))
	}
	for round, keys := range []string{rotKey1 + "," + rotKey2, rotKey2 + "\n" + rotKey1, rotKey2} {
		for i, n := range nodes {
			if err := n.SetEncryptKeys(keys); err != nil {
				t.Fatalf("round %d, n%d: %v", round+1, i+1, err)
			}
		}
		// Fresh gossip after the round: a metadata change travels under the new primary.
		if err := nodes[0].SetMeta(func(m *Meta) { m.Color = []string{"green", "blue", "red"}[round] }); err != nil {
			t.Fatal(err)
		}
		want := []string{"green", "blue", "red"}[round]
		waitFor(t, nodes[1], "n1's metadata of round "+want, func(ms []Member) bool {
			for _, m := range ms {
				if m.ID == "n1" {
					return m.Status == StatusAlive && m.Meta.Color == want
				}
			}
			return false
		})
	}
	fresh := testConfig("x1", buf)
	fresh.EncryptKey = rotKey2
	if n, err := start(t, fresh).Join([]string{nodes[0].Addr()}); err != nil || n != 1 {
		t.Errorf("a node with the new key could not join: %d, %v", n, err)
	}
	stale := testConfig("x2", buf)
	stale.EncryptKey = rotKey1
	if n, err := start(t, stale).Join([]string{nodes[0].Addr()}); err == nil || n != 0 {
		t.Errorf("a node with the removed key joined: %d, %v", n, err)
	}
	for _, key := range []string{rotKey1, rotKey2} {
		if strings.Contains(buf.String(), key) {
			t.Errorf("the log holds a key")
		}
	}
}

// TestSetEncryptKeysRefused: a mesh without encryption cannot start it later, and a bad key
// list changes nothing and names the key's position, not the key.
func TestSetEncryptKeysRefused(t *testing.T) {
	plain := start(t, testConfig("p1", nil))
	if err := plain.SetEncryptKeys(rotKey1); !errors.Is(err, ErrNotEncrypted) {
		t.Errorf("SetEncryptKeys on a plain mesh: %v, want ErrNotEncrypted", err)
	}
	cfg := testConfig("e1", nil)
	cfg.EncryptKey = rotKey1
	m := start(t, cfg)
	err := m.SetEncryptKeys(rotKey2 + ",c2hvcnQ=")
	if err == nil || !strings.Contains(err.Error(), "key 2 of 2") || strings.Contains(err.Error(), "c2hvcnQ=") {
		t.Errorf("a bad second key: %v", err)
	}
	if got := len(m.keyring.GetKeys()); got != 1 {
		t.Errorf("%d keys after a refused change, want 1", got)
	}
	if _, err := ParseEncryptKeys(" , "); err == nil {
		t.Error("an empty key list was accepted")
	}
}
