package consensus

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/clusterkey"
	"github.com/meshgw/meshgw/consensus/fsm"
)

// TestClusterKeyTransport: two nodes whose raft connections prove the cluster key form a
// cluster and replicate a write; a plain raft client and a node of another key get nothing
// from the raft port, and each refusal is logged.
func TestClusterKeyTransport(t *testing.T) {
	var logs logBuffer
	var nodes []*Node
	for _, id := range []string{"n1", "n2"} {
		nodes = append(nodes, startNode(t, Config{NodeID: id, Ephemeral: true, BindAddr: "127.0.0.1:0", BootstrapExpect: 2,
			ClusterKey: clusterkey.Derive("the admin key"), Registerer: prometheus.NewRegistry(), Tune: clusterRaft,
			Logger: logs.Logger(slog.LevelWarn)}))
	}
	var servers []raft.Server
	for _, n := range nodes {
		if err := n.Rejoined("a new cluster"); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, raft.Server{ID: raft.ServerID(n.ID()), Address: raft.ServerAddress(n.Address())})
	}
	if err := nodes[0].BootstrapWith(servers); err != nil {
		t.Fatal(err)
	}
	var leader *Node
	waitFor(t, "a leader over keyed connections", func() bool {
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
	s := spec(t, 8011)
	if _, err := leader.Apply(ctx, fsm.Register{Spec: s, Owner: leader.ID(), At: time.Unix(1, 0)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the write on both nodes", func() bool {
		for _, n := range nodes {
			if _, ok := n.Worker(s.ID()); !ok {
				return false
			}
		}
		return true
	})

	addr := nodes[0].Address()
	t.Run("plain raft client", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = c.Write(append([]byte{0, 0x80, 0x80, 0x80, 0x80, 0x80}, make([]byte, 64)...)) // raft's rpcAppendEntries
		_, err = io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the raft port kept an unproven connection open")
		}
	})
	t.Run("another key", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := clusterkey.Derive("a guess").Dial(c, time.Now().Add(10*time.Second)); !errors.Is(err, clusterkey.ErrRefused) {
			t.Fatalf("a handshake with another key: %v, want refused", err)
		}
	})
	waitFor(t, "the refusals in the log", func() bool {
		return len(logs.Lines("did not prove the cluster key")) >= 1
	})
}
