package consensus

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
)

// How a node of an ackCluster serves WatchApplied.
const (
	watchServed        = iota
	watchUnimplemented // as a gateway of a version without it
	watchSilent        // opens the stream and never sends: a stalled connection
)

// interceptors count node i's WaitApplied calls and serve its WatchApplied as c.watch[i] says.
func (c *ackCluster) interceptors(i int) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if info.FullMethod == consensusv1.FleetAck_WaitApplied_FullMethodName {
				c.asked[i].Add(1)
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if info.FullMethod == consensusv1.FleetAck_WatchApplied_FullMethodName {
				switch c.watch[i].Load() {
				case watchUnimplemented:
					return status.Error(codes.Unimplemented, "unknown method WatchApplied")
				case watchSilent:
					<-ss.Context().Done()
					return nil
				}
			}
			return h(srv, ss)
		}),
	}
}

func (c *ackCluster) askedTotal() int64 {
	var n int64
	for i := range c.asked {
		n += c.asked[i].Load()
	}
	return n
}

// Peers push their applied index to the writer on the streams it follows: a write is
// acknowledged by every live peer with no WaitApplied request sent to any.
func TestPeersPushTheirAppliedIndex(t *testing.T) {
	c := startAckCluster(t, 3, 5*time.Second, func(_ int, n *Node) Applied { return n })
	lead := c.waitLeader(t, 0, 1, 2)
	waitReady(t, c.nodes[lead])
	for _, writer := range []int{follower(lead, 3), lead} {
		for i := range 5 {
			res, _ := c.register(t, lead, 8140+10*writer+i)
			if rep := c.acks[writer].Acknowledge(context.Background(), res.Index); len(rep.Lagging) > 0 || len(rep.Acked) != 3 {
				t.Fatalf("n%d's write %d: %+v", writer+1, i, rep)
			}
		}
	}
	if n := c.askedTotal(); n != 0 {
		t.Errorf("the peers were asked WaitApplied %d times; want none: their streams push the index", n)
	}
}

// A peer that serves no WatchApplied (an older version) is asked WaitApplied at once, and one
// whose stream stalls is asked after feedGrace: both acknowledge, long before the timeout.
func TestPeersWithoutAStreamAreAsked(t *testing.T) {
	for _, mode := range []int32{watchUnimplemented, watchSilent} {
		c := startAckCluster(t, 3, 5*time.Second, func(_ int, n *Node) Applied { return n })
		lead := c.waitLeader(t, 0, 1, 2)
		waitReady(t, c.nodes[lead])
		writer, other := follower(lead, 3), follower(follower(lead, 3), 3)
		c.watch[other].Store(mode)
		for i := range 3 {
			res, _ := c.register(t, lead, 8170+i)
			start := time.Now()
			rep := c.acks[writer].Acknowledge(context.Background(), res.Index)
			if len(rep.Lagging) > 0 || len(rep.Acked) != 3 {
				t.Fatalf("mode %d, write %d: %+v", mode, i, rep)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("mode %d, write %d: acknowledged after %v", mode, i, took)
			}
		}
		if c.asked[other].Load() == 0 {
			t.Errorf("mode %d: n%d, which pushes nothing, was never asked WaitApplied", mode, other+1)
		}
	}
}
