package server

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/meshgw/meshgw/test/logbuf"
)

// TestReloadFromNewOn: Reload is safe from New on, while Start runs beside it: before the mesh
// started it reloads no gossip keys (the mesh starts with Config's); once it started, it gives
// the mesh the keys the file holds now, and keeps those in use when the file does not read.
func TestReloadFromNewOn(t *testing.T) {
	const (
		oldKey = "c2VjcmV0LWtleS0xNi1ieQ==" // 16 bytes
		newKey = "YW5vdGhlci1rZXktMTZieQ=="
	)
	var mu sync.Mutex
	var file string // what the key file holds; "" does not read
	read := func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if file == "" {
			return "", errors.New("cannot read it")
		}
		return file, nil
	}
	logs := &logbuf.Buffer{}
	cfg := testConfig(t, logs)
	cfg.Cluster.GossipKey, cfg.Cluster.GossipKeyFile, cfg.Cluster.ReadGossipKeys = oldKey, "keys", read
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Reload()
	if got := logs.Lines("SIGHUP: nothing to reload (no --tls-cert)"); len(got) != 1 {
		t.Errorf("before Start: %q, want one line saying there is no TLS to reload", got)
	}
	if got := logs.Lines("gossip key"); len(got) != 0 {
		t.Errorf("before Start: %q, want no gossip key reloaded", got)
	}
	done := make(chan struct{})
	go func() { // a SIGHUP while the gateway starts
		defer close(done)
		s.Reload()
	}()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	<-done
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	defer func() { cancel(); <-ran }()

	unread := func() []string {
		return logs.Lines("level=ERROR", "SIGHUP: the gossip key file did not reload; the keys in use stay")
	}
	before := len(unread()) // the reload beside Start saw the mesh, or not
	s.Reload()
	if got := unread(); len(got) != before+1 {
		t.Errorf("an unreadable file: %q, want one more error keeping the keys", got)
	}
	mu.Lock()
	file = newKey + "\n" + oldKey
	mu.Unlock()
	s.Reload()
	if got := logs.Lines("SIGHUP: reloaded the gossip keys", "file=keys"); len(got) != 1 {
		t.Errorf("a rotation: %q, want one line naming the file", got)
	}
}
