package consensus

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/certs"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/test/testkit"
)

// testPKI makes a CA in a temporary folder and returns a function loading a node's certificate.
func testPKI(t *testing.T) func(id string) *certs.Store {
	t.Helper()
	dir := t.TempDir()
	if _, err := certs.CreateCA(certs.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	return func(id string) *certs.Store {
		t.Helper()
		if _, err := certs.CreateNode(certs.Options{Dir: dir}, id, []string{"127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
		cert, key := certs.NodeFiles(dir, id)
		s, err := certs.Load(certs.Files{Cert: cert, Key: key, CA: filepath.Join(dir, certs.CACertFile)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func tlsOf(s *certs.Store) *TLSConfig {
	return &TLSConfig{Listen: s.PeerConfig(), Dial: s.DialConfig()}
}

// TestTLSTransport: two nodes on raft's TCP transport over mutual TLS form a cluster and
// replicate a write; a client without a certificate, one with a certificate of another CA, and
// a plaintext client all get nothing from the raft port, and each refusal is logged.
func TestTLSTransport(t *testing.T) {
	node := testPKI(t)
	stranger := testPKI(t)("n9")
	var logs logBuffer
	nodes := pairReplicates(t, func(id string) Config {
		return Config{TLS: tlsOf(node(id)), Logger: logs.Logger(slog.LevelWarn)}
	}, 8001)

	addr := nodes[0].Address()
	refused := []struct {
		name string
		cfg  *tls.Config
	}{
		{"no certificate", &tls.Config{InsecureSkipVerify: true}},
		{"another CA", stranger.DialConfig()},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			if err := tlsRefused(addr, tt.cfg); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("plaintext", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = c.Write([]byte{0, 0x80, 0x80, 0x80, 0x80, 0x80}) // raft's rpcAppendEntries, msgpack
		n, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the raft port kept a plaintext connection open")
		}
		_ = n // a TLS alert may come back; raft never answers
	})
	testkit.For(t, "a refusal in the log", func() bool { return len(logs.Lines("TLS handshake failed")) == 1 })
}

// tlsRefused dials addr with cfg and reports an error unless the server refuses: the handshake
// fails, or (TLS 1.3, where the server judges the client's certificate after the client is
// done) the first read fails without a timeout.
func tlsRefused(addr string, cfg *tls.Config) error {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	c, err := d.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		return nil
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case err == nil:
		return errors.New("the server sent data to a client it should refuse")
	case errors.As(err, &ne) && ne.Timeout():
		return errors.New("the server kept the connection open")
	}
	return nil
}

// pairReplicates starts two nodes on raft's TCP transport on loopback, configured by cfg (to
// which it adds what a pair needs), bootstraps them together, and checks that a write through
// the leader reaches both; it returns the nodes. port is the write's worker port.
func pairReplicates(t *testing.T, cfg func(id string) Config, port int) []*Node {
	t.Helper()
	var nodes []*Node
	for _, id := range []string{"n1", "n2"} {
		c := cfg(id)
		c.NodeID, c.Ephemeral, c.BindAddr, c.BootstrapExpect = id, true, "127.0.0.1:0", 2
		c.Registerer, c.Tune = prometheus.NewRegistry(), clusterRaft
		nodes = append(nodes, startNode(t, c))
	}
	var servers []raft.Server
	for _, n := range nodes {
		if err := n.Rejoined("a new cluster"); err != nil { // as ExpectBootstrap does
			t.Fatal(err)
		}
		servers = append(servers, raft.Server{ID: raft.ServerID(n.ID()), Address: raft.ServerAddress(n.Address())})
	}
	if err := nodes[0].BootstrapWith(servers); err != nil {
		t.Fatal(err)
	}
	var leader *Node
	testkit.For(t, "a leader", func() bool {
		for _, n := range nodes {
			if n.IsLeader() && n.ClusterID() != "" {
				leader = n
				return true
			}
		}
		return false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := spec(t, port)
	if _, err := leader.Apply(ctx, fsm.Register{Spec: s, Owner: leader.ID(), At: time.Unix(1, 0)}); err != nil {
		t.Fatal(err)
	}
	testkit.For(t, "the write on both nodes", func() bool {
		for _, n := range nodes {
			if _, ok := n.Worker(s.ID()); !ok {
				return false
			}
		}
		return true
	})
	return nodes
}
