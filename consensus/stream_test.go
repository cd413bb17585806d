package consensus

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/meshgw/meshgw/clusterkey"
	"github.com/meshgw/meshgw/test/testkit"
)

// TestClusterKeyTransport: two nodes whose raft connections prove the cluster key form a
// cluster and replicate a write; a plain raft client and a node of another key get nothing
// from the raft port, and each refusal is logged.
func TestClusterKeyTransport(t *testing.T) {
	var logs logBuffer
	nodes := pairReplicates(t, func(string) Config {
		return Config{ClusterKey: clusterkey.Derive("the admin key"), Logger: logs.Logger(slog.LevelWarn)}
	}, 8011)

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
	testkit.For(t, "the refusals in the log", func() bool {
		return len(logs.Lines("did not prove the cluster key")) >= 1
	})
}
