package fleetack

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/consensustest"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/test/testkit"
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
				ss = &countingStream{ServerStream: ss, c: c, node: i}
			}
			return h(srv, ss)
		}),
	}
}

// countingStream counts the applied indexes node sends on one WatchApplied stream, by watcher.
type countingStream struct {
	grpc.ServerStream
	c    *ackCluster
	node int
	from string
}

func (s *countingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if req, ok := m.(*consensusv1.WatchAppliedRequest); ok && err == nil {
		s.from = req.From
	}
	return err
}

func (s *countingStream) SendMsg(m any) error {
	if a, ok := m.(*consensusv1.AppliedIndex); ok && a.Applied > 0 {
		s.c.pushedMu.Lock()
		s.c.pushed[[2]string{s.c.Nodes[s.node].ID(), s.from}]++
		s.c.pushedMu.Unlock()
	}
	return s.ServerStream.SendMsg(m)
}

// pushes returns how many applied indexes node from sent to node to.
func (c *ackCluster) pushes(from, to int) int {
	c.pushedMu.Lock()
	defer c.pushedMu.Unlock()
	return c.pushed[[2]string{c.Nodes[from].ID(), c.Nodes[to].ID()}]
}

// registerFor writes a registration through the leader on behalf of node writer, as the
// leader does for a write writer forwarded, and returns its index.
func (c *ackCluster) registerFor(t *testing.T, lead, writer, port int) uint64 {
	t.Helper()
	cmd := fsm.Register{Spec: consensustest.Spec(t, port), Owner: "n1", At: time.Unix(1, 0)}
	data, err := fsm.Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Nodes[lead].ApplyEntry(context.Background(), cmd.Type(), data, c.Nodes[writer].ID())
	if err != nil {
		t.Fatal(err)
	}
	return res.Index
}

func (c *ackCluster) askedTotal() int64 {
	var n int64
	for i := range c.asked {
		n += c.asked[i].Load()
	}
	return n
}

// Peers push their applied index to the writer on the streams it follows: a write is
// acknowledged by every live peer with no WaitApplied request sent to any. They push it only
// for the writer's own writes (each entry names the node that proposed it): nothing is sent to
// a gateway for the writes of others, which it does not wait for.
func TestPeersPushTheirAppliedIndex(t *testing.T) {
	c := startAckCluster(t, 3, 5*time.Second, func(_ int, n *consensus.Node) Applied { return n })
	lead := c.WaitLeader(t, 0, 1, 2)
	consensustest.WaitReady(t, c.Nodes[lead])
	f := follower(lead, 3)
	other := follower(f, 3)
	for _, writer := range []int{f, lead} {
		for i := range 5 {
			index := c.registerFor(t, lead, writer, 8140+10*writer+i)
			if rep := c.acks[writer].Acknowledge(context.Background(), index); len(rep.Lagging) > 0 || len(rep.Acked) != 3 {
				t.Fatalf("n%d's write %d: %+v", writer+1, i, rep)
			}
		}
	}
	if n := c.askedTotal(); n != 0 {
		t.Errorf("the peers were asked WaitApplied %d times; want none: their streams push the index", n)
	}
	before := c.pushes(other, f)
	var last uint64
	for i := range 10 { // the leader's own writes, which f does not wait for
		last = c.registerFor(t, lead, lead, 8180+i)
		c.acks[lead].Acknowledge(context.Background(), last)
	}
	consensustest.WaitApplied(t, c.Nodes, last)
	if got := c.pushes(other, f) - before; got != 0 {
		t.Errorf("n%d pushed n%d %d applied indexes for 10 writes of n%d; want none", other+1, f+1, got, lead+1)
	}
}

// A peer that serves no WatchApplied (an older version) is asked WaitApplied at once, and one
// whose stream stalls is asked after feedGrace: both acknowledge, long before the timeout.
func TestPeersWithoutAStreamAreAsked(t *testing.T) {
	for _, mode := range []int32{watchUnimplemented, watchSilent} {
		c := startAckCluster(t, 3, 5*time.Second, func(_ int, n *consensus.Node) Applied { return n })
		lead := c.WaitLeader(t, 0, 1, 2)
		consensustest.WaitReady(t, c.Nodes[lead])
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

// A peer that served no WatchApplied (an older version) is tried again after feedRecheck: once
// it serves the stream (upgraded), the writer follows it and asks it nothing more.
func TestUpgradedPeerIsFollowedAgain(t *testing.T) {
	c := startAckCluster(t, 3, 5*time.Second, func(_ int, n *consensus.Node) Applied { return n })
	lead := c.WaitLeader(t, 0, 1, 2)
	consensustest.WaitReady(t, c.Nodes[lead])
	writer, other := follower(lead, 3), follower(follower(lead, 3), 3)
	c.acks[writer].recheck.Store(int64(100 * time.Millisecond))
	c.watch[other].Store(watchUnimplemented)
	index := c.registerFor(t, lead, writer, 8195)
	if rep := c.acks[writer].Acknowledge(context.Background(), index); len(rep.Lagging) > 0 {
		t.Fatalf("lagging %v", rep.Lagging)
	}
	if c.asked[other].Load() == 0 {
		t.Fatalf("n%d, which served no stream, was not asked", other+1)
	}
	c.watch[other].Store(watchServed) // upgraded
	id := c.Nodes[other].ID()
	testkit.For(t, "the writer to follow the upgraded peer's stream", func() bool {
		applied, unsupported, _, _ := c.acks[writer].feed(id).get()
		return !unsupported && applied > 0
	})
	asked := c.asked[other].Load()
	for i := range 3 {
		index := c.registerFor(t, lead, writer, 8196+i)
		if rep := c.acks[writer].Acknowledge(context.Background(), index); len(rep.Lagging) > 0 {
			t.Fatalf("write %d: lagging %v", i, rep.Lagging)
		}
	}
	if got := c.asked[other].Load() - asked; got != 0 {
		t.Errorf("the upgraded peer was asked %d more times; want none: its stream pushes the index", got)
	}
}

// A watcher that does not ask for its own writes only (a gateway of an older version) is sent
// every index its peer applies, as before.
func TestOlderWatchersGetEveryIndex(t *testing.T) {
	c := startAckCluster(t, 3, 5*time.Second, func(_ int, n *consensus.Node) Applied { return n })
	lead := c.WaitLeader(t, 0, 1, 2)
	consensustest.WaitReady(t, c.Nodes[lead])
	f := follower(lead, 3)
	cc, err := grpc.NewClient(c.Addrs[c.Nodes[lead].ID()], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := consensusv1.NewFleetAckClient(cc).WatchApplied(ctx, &consensusv1.WatchAppliedRequest{From: c.Nodes[f].ID()})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 3 { // the leader's own writes, not the watcher's
		last = c.registerFor(t, lead, lead, 8190+i)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("the stream ended before index %d: %v", last, err)
		}
		if m.Applied >= last {
			return
		}
	}
}
