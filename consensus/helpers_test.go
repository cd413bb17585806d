package consensus

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// TestMain checks that no test leaves a goroutine behind, but for a wait parked on a raft
// future that raft left unresolved when it shut down (Node.wait): raft's to mend, and one
// parked goroutine per such future.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*deferError).Error"))
}

type logBuffer = logbuf.Buffer

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
		cfg.Logger = testkit.Quiet()
	}
	if cfg.Tune == nil {
		cfg.Tune = testkit.FastRaft
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
	testkit.For(t, n.ID()+" to lead with a cluster id", func() bool { return n.IsLeader() && n.ClusterID() != "" })
}
