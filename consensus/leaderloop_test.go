package consensus

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// stuckFuture is a raft future that raft never resolves until released: one raft had handed
// to its FSM queue (a buffered channel) when it shut down, which raft v1.8.0 leaves
// unanswered.
type stuckFuture struct{ release chan struct{} }

func (f stuckFuture) Error() error {
	<-f.release
	return raft.ErrRaftShutdown
}

// TestLeaderLoopEndsWithItsLeadership: a leader loop waiting on its barrier returns once its
// leadership ends (its context), even when raft never resolves the barrier. It used to wait
// on the future alone: losing leadership while raft shut down hung Node.Shutdown for good
// (a make test run timed out in TestVoteForAVoterPromotedSinceOurConfiguration this way).
func TestLeaderLoopEndsWithItsLeadership(t *testing.T) {
	release := make(chan struct{})
	defer close(release) // the future's waiter, if any, ends with the test
	n := &Node{log: slog.New(slog.DiscardHandler),
		barrier: func(time.Duration) raft.Future { return stuckFuture{release} }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go n.leaderLoop(ctx, done)
	cancel() // leadership lost
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader loop still waits on a barrier raft never resolves, 10 s after its leadership ended")
	}
}
