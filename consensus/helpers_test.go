package consensus

import (
	"fmt"
	"github.com/meshgw/meshgw/test/logbuf"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fastRaft shortens raft's timeouts as raft's own in-memory tests do, with some slack for a
// busy two-core machine.
func fastRaft(c *raft.Config) {
	c.HeartbeatTimeout = 100 * time.Millisecond
	c.ElectionTimeout = 100 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type logBuffer = logbuf.Buffer

// waitFor polls cond until it holds or the deadline passes. It waits for a condition, not for
// time: the poll interval only bounds how late the condition is noticed.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

func ptr[T any](v T) *T { return &v }

// spec returns the normalized spec of an HTTP worker on port.
func spec(t testing.TB, port int) worker.Spec {
	t.Helper()
	s := worker.Spec{URL: fmt.Sprintf("http://127.0.0.1:%d", port), APIKey: "sk-secret"}
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	return s
}

func startNode(t testing.TB, cfg Config) *Node {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	if cfg.Tune == nil {
		cfg.Tune = fastRaft
	}
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	return n
}

func waitReady(t testing.TB, n *Node) {
	t.Helper()
	waitFor(t, n.ID()+" to lead with a cluster id", func() bool { return n.IsLeader() && n.ClusterID() != "" })
}
