package server

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/consensustest"
	"github.com/meshgw/meshgw/test/testkit"
)

// TestLeaderLoopBeforeStartReturns: raft may run the leader loop of a single voter before
// consensus.Start has returned its node (startCluster sets cluster.node only then). The loop
// waits for the node, so the gateway still marks its state current and applies its records;
// it used to read the nil node, panic, and spend the once that closes caughtUp.
func TestLeaderLoopBeforeStartReturns(t *testing.T) {
	c := &cluster{caughtUp: make(chan struct{}), nodeSet: make(chan struct{}), log: testkit.Quiet()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.leaderLoop(ctx) // as raft calls it, early
	}()
	node := consensustest.StartNode(t, consensus.Config{NodeID: "n1", Ephemeral: true, BindAddr: "127.0.0.1:0",
		Registerer: prometheus.NewRegistry()})
	select {
	case <-c.caughtUp:
		t.Fatal("caught up before the node was set")
	default:
	}
	c.node = node
	close(c.nodeSet)
	testkit.Within(t, 5*time.Second, "the early leader loop marks the state current", func() bool {
		select {
		case <-c.caughtUp:
			return true
		default:
			return false
		}
	})
	c.duties.Set() // no duties: Run returns when ctx ends
	cancel()
	<-done
}
