package forward

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/consensustest"
	"github.com/meshgw/meshgw/consensus/fsm"
)

// TestForwarderTakesARefusalAsNothingWritten: a leader that refuses the caller (PeerAuth) has
// not looked at the entry, so the write is not of unknown outcome: it fails as a leader this
// node cannot use (consensus.ErrNoLeader), after NoLeaderWait, and is never re-sent as unanswered.
func TestForwarderTakesARefusalAsNothingWritten(t *testing.T) {
	c := startForwardCluster(t, 3, Options{NoLeaderWait: 200e6})
	lead := c.ready(t)
	hook := grpc.UnaryServerInterceptor(func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
		return nil, status.Error(codes.PermissionDenied, "meshgw: refused: the caller is not a member of the mesh")
	})
	c.hooks[lead].Store(&hook)
	s := consensustest.Spec(t, 8102)
	_, err := c.fwd[consensustest.Others(3, lead)[0]].Apply(testCtx(t), fsm.Register{Spec: s, Owner: "n1"})
	if !errors.Is(err, consensus.ErrNoLeader) || errors.Is(err, consensus.ErrOutcomeUnknown) {
		t.Fatalf("refused write: %v; want consensus.ErrNoLeader, not consensus.ErrOutcomeUnknown", err)
	}
	if _, ok := c.Nodes[lead].Worker(s.ID()); ok {
		t.Fatal("a refused write was applied")
	}
}

// TestEveryCommandIsForwardableOrLeaderOnly: a command that gets a handler must be sorted into
// forwardable or leaderOnly, or the Forward service would refuse it (or take what only a leader
// proposes).
func TestEveryCommandIsForwardableOrLeaderOnly(t *testing.T) {
	for i := range 256 {
		typ := fsm.CommandType(i)
		if !typ.Known() {
			continue
		}
		if forwardable[typ] == leaderOnly[typ] {
			t.Errorf("%s: forwardable %v, leader-only %v; want exactly one", typ, forwardable[typ], leaderOnly[typ])
		}
	}
}
