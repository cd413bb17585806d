package consensus

import (
	"testing"

	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/leader"
)

// The helpers of the tests that run the voter reconciler (package consensus/voters) on real
// nodes; the builders and the fake membership they share with that package's tests are in
// consensus/voters/voterstest.

// lateVoters is a voter reconciler for a node a test has yet to start: loop is the node's
// leader loop, and bind makes the reconciler (of cfg) once the node exists.
type lateVoters struct {
	*voters.Reconciler
	cfg  voters.Config
	loop leader.Loop
}

func newLateVoters(cfg voters.Config) *lateVoters { return &lateVoters{cfg: cfg} }

func (l *lateVoters) bind(t *testing.T, n *Node) {
	t.Helper()
	cfg := l.cfg
	cfg.Node = n
	r, err := voters.NewReconciler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.Reconciler = r
	l.loop.Set(r)
}
