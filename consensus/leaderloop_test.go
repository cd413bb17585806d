package consensus

import (
	"context"
	"errors"
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

// TestReadIndexEndsWithItsContext: a ReadIndex whose barrier raft never resolves returns its
// context's error when the context ends, rather than waiting on the future for good.
func TestReadIndexEndsWithItsContext(t *testing.T) {
	n := startNode(t, Config{NodeID: "n1", BindAddr: "127.0.0.1:0", StateDir: t.TempDir()})
	waitReady(t, n)
	if _, err := n.ReadIndex(context.Background()); err != nil {
		t.Fatalf("ReadIndex on a leader: %v", err)
	}
	release := make(chan struct{})
	defer close(release)
	// The leader loop is done with the barrier once the cluster has its id (waitReady).
	n.barrier = func(time.Duration) raft.Future { return stuckFuture{release} }
	n.readyTerm.Store(0) // as in a new term: ReadIndex needs a barrier first
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	got := make(chan error, 1)
	go func() { _, err := n.ReadIndex(ctx); got <- err }()
	select {
	case err := <-got:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ReadIndex with a stuck barrier and an ended context: %v, want the context's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadIndex still waits on a barrier raft never resolves, 10 s after its context ended")
	}
}
