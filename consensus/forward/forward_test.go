package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hashicorp/raft"
	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/consensustest"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/test/testkit"
)

// fwdCluster is a cluster on raft's in-memory transport with a real gRPC server per node on
// 127.0.0.1, and a Forwarder per node resolving node ids to those servers.
type fwdCluster struct {
	*consensustest.Cluster
	calls []atomic.Int64 // Forward RPCs each server received
	hooks []atomic.Pointer[grpc.UnaryServerInterceptor]
	fwd   []*Forwarder

	mu       sync.Mutex
	override func(id string) (string, bool, bool) // (addr, ok, handled)
}

func startForwardCluster(t *testing.T, size int, o Options, tune ...func(i int, c *consensus.Config)) *fwdCluster {
	t.Helper()
	c := &fwdCluster{
		Cluster: consensustest.Start(t, size, tune...),
		calls:   make([]atomic.Int64, size),
		hooks:   make([]atomic.Pointer[grpc.UnaryServerInterceptor], size),
	}
	c.Serve(t, func(i int) []grpc.ServerOption {
		return []grpc.ServerOption{grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			c.calls[i].Add(1)
			if hook := c.hooks[i].Load(); hook != nil {
				return (*hook)(ctx, req, info, h)
			}
			return h(ctx, req)
		})}
	}, func(i int, s *grpc.Server) { Register(s, c.Nodes[i], testkit.Quiet()) })
	o.ResolveRPC = c.resolve
	if o.Logger == nil {
		o.Logger = testkit.Quiet()
	}
	for _, n := range c.Nodes {
		f, err := New(n, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := f.Shutdown(); err != nil {
				t.Errorf("forwarder shutdown: %v", err)
			}
		})
		c.fwd = append(c.fwd, f)
	}
	return c
}

// addr is node i's gRPC address.
func (c *fwdCluster) addr(i int) string { return c.Addrs[c.Nodes[i].ID()] }

// resolve maps node id nK to the gRPC address of node K, unless an override handles it.
func (c *fwdCluster) resolve(id string) (string, bool) {
	c.mu.Lock()
	o := c.override
	c.mu.Unlock()
	if o != nil {
		if addr, ok, handled := o(id); handled {
			return addr, ok
		}
	}
	return c.ResolveRPC(id)
}

func (c *fwdCluster) setOverride(o func(id string) (string, bool, bool)) {
	c.mu.Lock()
	c.override = o
	c.mu.Unlock()
}

func (c *fwdCluster) callCounts() []int64 {
	out := make([]int64, len(c.calls))
	for i := range c.calls {
		out[i] = c.calls[i].Load()
	}
	return out
}

// ready waits for a leader every node agrees on and for the cluster id on every node.
func (c *fwdCluster) ready(t *testing.T) int {
	t.Helper()
	all := consensustest.Others(len(c.Nodes), -1)
	lead := c.WaitLeader(t, all...)
	testkit.For(t, "the cluster id on every node", func() bool {
		for _, n := range c.Nodes {
			if n.ClusterID() == "" {
				return false
			}
		}
		return true
	})
	return lead
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestForwardFromFollower writes through a follower's forwarder: every Result (index, outcome,
// record, business error) is the leader's, and equals what the leader's state holds and what a
// local Apply answers.
func TestForwardFromFollower(t *testing.T) {
	c := startForwardCluster(t, 3, Options{})
	lead := c.ready(t)
	leader, fi := c.Nodes[lead], consensustest.Others(3, lead)[0]
	f := c.fwd[fi]
	ctx := testCtx(t)
	a := consensustest.Spec(t, 8001)
	other := a.Clone()
	other.Model = "another-model"
	at := time.Unix(1_700_000_000, 0).UTC()

	steps := []struct {
		name    string
		cmd     fsm.Command
		outcome fsm.Outcome
		err     error // the business error, compared field for field
		local   bool  // a rejection: a local Apply on the leader answers the same
	}{
		{"register", fsm.Register{Spec: a, Owner: "n1", At: at}, fsm.Created, nil, false},
		{"register again", fsm.Register{Spec: a, Owner: "n1", At: at}, fsm.Unchanged, nil, true},
		{"register another spec", fsm.Register{ID: a.ID(), Spec: other, Owner: "n1"}, fsm.Rejected,
			&fsm.ConflictError{ID: a.ID(), Reason: "already registered with another spec"}, true},
		{"disable", fsm.SetFlags{ID: a.ID(), Flags: fsm.FlagChange{Disabled: ptr(true), Reason: "maintenance", By: "ops", At: at}}, fsm.Updated, nil, false},
		{"lost compare-and-set", fsm.Transfer{ID: a.ID(), To: "n2", ExpectedEpoch: 1}, fsm.Rejected, nil, true},
		{"remove unknown", fsm.Remove{ID: "w-000000000000"}, fsm.Rejected, &fsm.NotFoundError{ID: "w-000000000000"}, true},
		{"invalid", fsm.Register{Spec: a}, fsm.Rejected, &fsm.InvalidError{Field: "owner", Msg: "empty"}, true},
		{"remove", fsm.Remove{ID: a.ID()}, fsm.Removed, nil, false},
	}
	for _, st := range steps {
		before := leader.Workers()
		res, err := f.Apply(ctx, st.cmd)
		if res.Outcome != st.outcome || res.Index == 0 || err != res.Err {
			t.Fatalf("%s: %+v, %v; want outcome %s", st.name, res, err, st.outcome)
		}
		if st.err != nil {
			if diff := cmp.Diff(st.err, err); diff != "" {
				t.Fatalf("%s: business error (-want +got):\n%s", st.name, diff)
			}
		}
		if st.outcome == fsm.Rejected && !errors.Is(err, fsm.ErrConflict) && !errors.Is(err, fsm.ErrNotFound) && !errors.Is(err, fsm.ErrInvalid) {
			t.Fatalf("%s: rejected with %v", st.name, err)
		}
		// The record is the leader's, api_key included, as a local Apply returns it.
		if rec, ok := leader.Worker(a.ID()); ok && res.Record != nil && st.outcome != fsm.Removed {
			if diff := cmp.Diff(rec, *res.Record); diff != "" {
				t.Fatalf("%s: record (-leader +forwarded):\n%s", st.name, diff)
			}
		}
		if st.outcome == fsm.Removed {
			if diff := cmp.Diff(before[0], *res.Record); diff != "" {
				t.Fatalf("%s: removed record (-leader +forwarded):\n%s", st.name, diff)
			}
		}
		if st.local {
			lres, lerr := leader.Apply(ctx, st.cmd)
			if diff := cmp.Diff(lres, res, cmpopts.IgnoreFields(fsm.Result{}, "Index")); diff != "" || fmt.Sprint(lerr) != fmt.Sprint(err) {
				t.Fatalf("%s: forwarded result differs from a local Apply's (-local +forwarded):\n%s\n%v / %v", st.name, diff, lerr, err)
			}
		}
		consensustest.WaitApplied(t, c.Nodes, res.Index)
	}
	if got := c.callCounts(); got[lead] != int64(len(steps)) || got[fi] != 0 {
		t.Fatalf("forward RPCs per node %v; want %d on the leader %d only", got, len(steps), lead)
	}

	// The leader's own forwarder applies locally, without an RPC.
	res, err := c.fwd[lead].Apply(ctx, fsm.Register{Spec: a, Owner: "n1"})
	if err != nil || res.Outcome != fsm.Created {
		t.Fatalf("leader's forwarder: %+v, %v", res, err)
	}
	if got := c.callCounts(); got[lead] != int64(len(steps)) {
		t.Fatalf("the leader's forwarder sent an RPC: %v", got)
	}
}

// TestForwardFollowsNotLeader points the leader's id at a follower's server: the follower
// answers NotLeader and never forwards itself, the forwarder follows the answer, and gives up
// after MaxHops when the answers go round in a circle.
func TestForwardFollowsNotLeader(t *testing.T) {
	c := startForwardCluster(t, 3, Options{})
	lead := c.ready(t)
	rest := consensustest.Others(3, lead)
	from, stale := rest[0], rest[1]
	leaderID := c.Nodes[lead].ID()
	ctx := testCtx(t)
	before := c.Nodes[lead].AppliedIndex()

	// Every lookup of the leader gives the follower's address: a loop, cut after MaxHops.
	c.setOverride(func(id string) (string, bool, bool) { return c.addr(stale), true, id == leaderID })
	_, err := c.fwd[from].Apply(ctx, fsm.Register{Spec: consensustest.Spec(t, 8002), Owner: "n1"})
	var nl *consensus.NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != leaderID {
		t.Fatalf("a circle of NotLeader answers: %v; want *consensus.NotLeaderError naming %s", err, leaderID)
	}
	if got := c.callCounts(); got[stale] != DefaultHops || got[lead] != 0 || got[from] != 0 {
		t.Fatalf("forward RPCs per node %v; want %d on node %d only", got, DefaultHops, stale)
	}
	if c.Nodes[lead].AppliedIndex() != before {
		t.Fatal("a refused write was applied")
	}

	// A stale lookup once: the follower's NotLeader answer leads to the leader.
	var once atomic.Bool
	c.setOverride(func(id string) (string, bool, bool) {
		return c.addr(stale), true, id == leaderID && once.CompareAndSwap(false, true)
	})
	res, err := c.fwd[from].Apply(ctx, fsm.Register{Spec: consensustest.Spec(t, 8002), Owner: "n1"})
	if err != nil || res.Outcome != fsm.Created {
		t.Fatalf("after one NotLeader answer: %+v, %v", res, err)
	}
	if got := c.callCounts(); got[stale] != DefaultHops+1 || got[lead] != 1 {
		t.Fatalf("forward RPCs per node %v", got)
	}
}

// TestForwardFollowsNewLeader isolates the leader: writes through a remaining follower reach
// the new leader, and after healing the old leader's forwarder reaches whoever leads.
func TestForwardFollowsNewLeader(t *testing.T) {
	c := startForwardCluster(t, 3, Options{})
	lead := c.ready(t)
	rest := consensustest.Others(3, lead)
	ctx := testCtx(t)
	if _, err := c.fwd[rest[0]].Apply(ctx, fsm.Register{Spec: consensustest.Spec(t, 8003), Owner: "n1"}); err != nil {
		t.Fatal(err)
	}

	c.Isolate(lead)
	newLead := c.WaitLeader(t, rest...)
	follower := rest[0]
	if follower == newLead {
		follower = rest[1]
	}
	before := c.calls[newLead].Load()
	res, err := c.fwd[follower].Apply(ctx, fsm.Register{Spec: consensustest.Spec(t, 8004), Owner: "n1"})
	if err != nil || res.Outcome != fsm.Created {
		t.Fatalf("write after the leader changed: %+v, %v", res, err)
	}
	if c.calls[newLead].Load() != before+1 {
		t.Fatal("the write did not go to the new leader")
	}
	c.fwd[follower].mu.Lock()
	conns := len(c.fwd[follower].conns)
	c.fwd[follower].mu.Unlock()
	if conns != 1 {
		t.Fatalf("the forwarder keeps %d connections; want only the new leader's", conns)
	}

	c.Heal()
	c.WaitLeader(t, 0, 1, 2)
	res, err = c.fwd[lead].Apply(ctx, fsm.Register{Spec: consensustest.Spec(t, 8005), Owner: "n1"})
	if err != nil || res.Outcome != fsm.Created {
		t.Fatalf("write from the healed old leader: %+v, %v", res, err)
	}
	consensustest.WaitApplied(t, c.Nodes, res.Index)
	for _, n := range c.Nodes {
		if len(n.Workers()) != 3 {
			t.Fatalf("%s holds %d records; want 3", n.ID(), len(n.Workers()))
		}
	}
}

// TestForwardNoLeader cuts every node off: a write fails with consensus.ErrNoLeader after
// NoLeaderWait, or sooner when its context ends first.
// TestForwardNoLeader: nodes 1 and 2 isolated, node 3 holds no quorum. Once it has heard from no
// leader for longer than heartbeats allow, a write through it fails at once with a
// *consensus.NoQuorumError (nothing written, no RPC sent) instead of waiting for a leader.
func TestForwardNoLeader(t *testing.T) {
	c := startForwardCluster(t, 3, Options{})
	c.ready(t)
	c.Isolate(0)
	c.Isolate(1)
	// Cut off from their RPC listeners too, as a partition would: node 3's probe of the
	// voters then reaches none.
	dead := closedAddr(t)
	c.setOverride(func(id string) (string, bool, bool) { return dead, true, id != "n3" })
	testkit.For(t, "node 3 to find itself cut off", func() bool { return c.Nodes[2].CutOff() != nil })
	start := time.Now()
	_, err := c.fwd[2].Apply(testCtx(t), fsm.Register{Spec: consensustest.Spec(t, 8006), Owner: "n1"})
	took := time.Since(start)
	var nq *consensus.NoQuorumError
	if !errors.As(err, &nq) || !errors.Is(err, consensus.ErrNoLeader) || errors.Is(err, consensus.ErrOutcomeUnknown) {
		t.Fatalf("Apply cut off from the quorum: %v; want a NoQuorumError", err)
	}
	if took > DefaultNoLeaderWait/4 {
		t.Errorf("took %v; want at once, not after waiting for a leader", took)
	}
	if got := c.callCounts(); got[0]+got[1]+got[2] != 0 {
		t.Fatalf("forward RPCs without a leader: %v", got)
	}
}

// noLeaderNode knows no leader; with cut set it also says it is cut off (consensus.Node.CutOff).
type noLeaderNode struct{ cut *atomic.Bool }

func (noLeaderNode) ID() string { return "n9" }
func (noLeaderNode) ApplyEntry(context.Context, fsm.CommandType, []byte, string) (fsm.Result, error) {
	return fsm.Result{}, consensus.ErrNoLeader
}
func (noLeaderNode) Leader() (string, bool) { return "", false }

type cutOffNoLeaderNode struct{ noLeaderNode }

// Configuration is three voters, n9 among them: the forwarder probes the other two.
func (cutOffNoLeaderNode) Configuration() (raft.Configuration, uint64, error) {
	return raft.Configuration{Servers: []raft.Server{{ID: "n7", Suffrage: raft.Voter}, {ID: "n8", Suffrage: raft.Voter},
		{ID: "n9", Suffrage: raft.Voter}}}, 1, nil
}

// closedAddr is a loopback address nothing listens on: a connection to it is refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func (n cutOffNoLeaderNode) CutOff() error {
	if n.cut.Load() {
		return &consensus.NoQuorumError{Silence: time.Second}
	}
	return nil
}

// TestForwardWaitsForALeader: a node that knows no leader but is not (yet) cut off waits for one,
// bounded by NoLeaderWait or the context; it stops waiting as soon as it finds itself cut off.
// In a synctest bubble: the times are exact.
func TestForwardWaitsForALeader(t *testing.T) {
	const wait, poll = 300 * time.Millisecond, 10 * time.Millisecond
	dead := closedAddr(t) // the other voters' RPC listeners: a probe reaches neither
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	live := ln.Addr().String() // the kernel completes the handshake: nothing needs to accept
	tests := []struct {
		name     string
		node     Node
		timeout  time.Duration
		cutAfter time.Duration // 0: never
		min, max time.Duration
		ctxErr   bool
		noQuorum bool
		reach    bool // the other voters' RPC listeners accept connections (a paused leader)
		unknown  bool // the mesh knows no RPC address for the other voters (it forgot them)
	}{
		{name: "bounded by NoLeaderWait", node: noLeaderNode{}, timeout: 10 * time.Second, min: wait, max: wait + poll},
		{name: "bounded by the context", node: noLeaderNode{}, timeout: 100 * time.Millisecond, min: 100 * time.Millisecond, max: 100*time.Millisecond + poll, ctxErr: true},
		{name: "a node not cut off", node: cutOffNoLeaderNode{noLeaderNode{cut: new(atomic.Bool)}}, timeout: 10 * time.Second, min: wait, max: wait + poll},
		{name: "cut off during the wait", timeout: 10 * time.Second, cutAfter: 100 * time.Millisecond, min: 100 * time.Millisecond, max: 100*time.Millisecond + poll, noQuorum: true},
		{name: "the other voters forgotten by the mesh: cut off", timeout: 10 * time.Second, cutAfter: 100 * time.Millisecond, min: 100 * time.Millisecond, max: 100*time.Millisecond + poll, noQuorum: true, unknown: true},
		{name: "silent but the voters reachable: a leader will come", timeout: 10 * time.Second, cutAfter: 100 * time.Millisecond, min: wait, max: wait + poll, reach: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				node := tt.node
				if node == nil {
					cut := new(atomic.Bool)
					node = cutOffNoLeaderNode{noLeaderNode{cut: cut}}
					time.AfterFunc(tt.cutAfter, func() { cut.Store(true) })
				}
				peer := dead
				if tt.reach {
					peer = live
				}
				f, err := New(node, Options{ResolveRPC: func(string) (string, bool) { return peer, !tt.unknown }, NoLeaderWait: wait,
					LeaderPoll: 10 * time.Millisecond, Logger: testkit.Quiet()})
				if err != nil {
					t.Fatal(err)
				}
				defer f.Shutdown()
				ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
				defer cancel()
				start := time.Now()
				_, err = f.Apply(ctx, fsm.Register{Spec: consensustest.Spec(t, 8007), Owner: "n9"})
				took := time.Since(start)
				var nq *consensus.NoQuorumError
				if !errors.Is(err, consensus.ErrNoLeader) || errors.Is(err, consensus.ErrOutcomeUnknown) ||
					errors.Is(err, context.DeadlineExceeded) != tt.ctxErr || errors.As(err, &nq) != tt.noQuorum {
					t.Fatalf("Apply without a leader: %v", err)
				}
				if took < tt.min || took > tt.max {
					t.Fatalf("took %v; want between %v and %v", took, tt.min, tt.max)
				}
			})
		})
	}
}

// TestForwardLeaderUnreachable: no RPC address, or one nothing listens on, means nothing was
// written, and consensus.ErrNoLeader once NoLeaderWait has passed.
func TestForwardLeaderUnreachable(t *testing.T) {
	c := startForwardCluster(t, 3, Options{NoLeaderWait: 300 * time.Millisecond})
	lead := c.ready(t)
	leaderID := c.Nodes[lead].ID()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	tests := []struct {
		name string
		addr string
		ok   bool
	}{
		{"no address known", "", false},
		{"nothing listens", closed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.setOverride(func(id string) (string, bool, bool) { return tt.addr, tt.ok, id == leaderID })
			before := c.Nodes[lead].AppliedIndex()
			_, err := c.fwd[consensustest.Others(3, lead)[0]].Apply(testCtx(t), fsm.Register{Spec: consensustest.Spec(t, 8007), Owner: "n1"})
			var ue *consensus.LeaderUnreachableError
			if !errors.As(err, &ue) || !errors.Is(err, consensus.ErrNoLeader) || ue.Leader != leaderID || ue.Address != tt.addr {
				t.Fatalf("unreachable leader: %v; want *consensus.LeaderUnreachableError", err)
			}
			if c.Nodes[lead].AppliedIndex() != before {
				t.Fatal("something was written")
			}
		})
	}
}

// TestForwardLeaderDiesMidCall stops the leader's gRPC server while it holds the request:
// before or after applying it, the caller cannot tell, so both are consensus.ErrOutcomeUnknown.
func TestForwardLeaderDiesMidCall(t *testing.T) {
	tests := []struct {
		name    string
		applies bool
	}{
		{"after applying", true},
		{"before applying", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startForwardCluster(t, 3, Options{})
			lead := c.ready(t)
			leader := c.Nodes[lead]
			var hook grpc.UnaryServerInterceptor = func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				var resp any
				var err error
				if tt.applies {
					resp, err = h(ctx, req)
				}
				c.Servers[lead].Stop() // closes the connection before the answer is written
				return resp, err
			}
			c.hooks[lead].Store(&hook)
			a := consensustest.Spec(t, 8008)
			from := consensustest.Others(3, lead)[0]
			_, err := c.fwd[from].Apply(testCtx(t), fsm.Register{Spec: a, Owner: "n1"})
			if err == nil && !c.Nodes[lead].IsLeader() {
				// Under load an election can move the leadership meanwhile: the re-sent register,
				// idempotent, is then answered by the new leader, and that answer is the write's.
				t.Logf("leadership moved during the call; the re-sent write was answered")
				testkit.For(t, "the record on the writer", func() bool { _, ok := c.Nodes[from].Worker(a.ID()); return ok })
				return
			}
			if !errors.Is(err, consensus.ErrOutcomeUnknown) {
				t.Fatalf("leader died mid-call: %v; want consensus.ErrOutcomeUnknown", err)
			}
			if _, ok := leader.Worker(a.ID()); ok != tt.applies {
				t.Fatalf("record on the leader: %v; want %v", ok, tt.applies)
			}
		})
	}
}

// TestForwardRefusesBadEntries sends entries straight to the leader's service: one its FSM
// would not decode is refused, and every node keeps running.
func TestForwardRefusesBadEntries(t *testing.T) {
	c := startForwardCluster(t, 3, Options{})
	lead := c.ready(t)
	cc, err := grpc.NewClient(c.addr(lead), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	client := consensusv1.NewForwardClient(cc)
	good, err := fsm.Encode(fsm.Register{Spec: consensustest.Spec(t, 8009), Owner: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		entry []byte
		want  consensusv1.ApplyStatus
	}{
		{"empty", nil, consensusv1.ApplyStatus_APPLY_STATUS_INVALID_ENTRY},
		{"unknown type", []byte{42}, consensusv1.ApplyStatus_APPLY_STATUS_INVALID_ENTRY},
		{"body does not decode", append([]byte{byte(fsm.TypeRegister)}, 0xff, 0xff, 0xff), consensusv1.ApplyStatus_APPLY_STATUS_INVALID_ENTRY},
		{"truncated body", good[:len(good)-3], consensusv1.ApplyStatus_APPLY_STATUS_INVALID_ENTRY},
		{"unknown type marked ignorable", []byte{byte(fsm.IgnoreUnknownFlag | 42)}, consensusv1.ApplyStatus_APPLY_STATUS_APPLIED},
		{"good", good, consensusv1.ApplyStatus_APPLY_STATUS_APPLIED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := c.Nodes[lead].AppliedIndex()
			a, err := client.Apply(testCtx(t), &consensusv1.ApplyRequest{Entry: tt.entry, From: "test"})
			if err != nil || a.Status != tt.want {
				t.Fatalf("answer %v, %v; want %s", a, err, tt.want)
			}
			if applied := c.Nodes[lead].AppliedIndex() != before; applied != (tt.want == consensusv1.ApplyStatus_APPLY_STATUS_APPLIED) {
				t.Fatalf("applied: %v", applied)
			}
		})
	}
	// A follower's service answers NotLeader for a good entry, naming the leader.
	fc, err := grpc.NewClient(c.addr(consensustest.Others(3, lead)[0]), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fc.Close() }()
	a, err := consensusv1.NewForwardClient(fc).Apply(testCtx(t), &consensusv1.ApplyRequest{Entry: good})
	if err != nil || a.Status != consensusv1.ApplyStatus_APPLY_STATUS_NOT_LEADER || a.LeaderId != c.Nodes[lead].ID() ||
		a.LeaderAddress != c.Nodes[lead].Address() {
		t.Fatalf("follower's answer %v, %v", a, err)
	}
}

func TestForwarderShutdown(t *testing.T) {
	c := startForwardCluster(t, 3, Options{})
	lead := c.ready(t)
	f := c.fwd[consensustest.Others(3, lead)[0]]
	if _, err := f.Apply(testCtx(t), fsm.Register{Spec: consensustest.Spec(t, 8010), Owner: "n1"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Apply(testCtx(t), fsm.Register{Spec: consensustest.Spec(t, 8011), Owner: "n1"}); !errors.Is(err, consensus.ErrShutdown) {
		t.Fatalf("Apply after Shutdown: %v; want consensus.ErrShutdown", err)
	}
	if _, err := New(c.Nodes[0], Options{}); err == nil {
		t.Fatal("a forwarder without a resolver")
	}
}

// slowLinksNode runs raft's timings times 3 (consensus.Config.RaftMultiplier).
type slowLinksNode struct{ noLeaderNode }

func (slowLinksNode) RaftMultiplier() int { return 3 }

// TestWaitsFollowTheRaftMultiplier: the defaults of the waits built on raft's timings scale with
// the node's multiplier; values set in Options stay.
func TestWaitsFollowTheRaftMultiplier(t *testing.T) {
	resolve := func(string) (string, bool) { return "", false }
	tests := []struct {
		name                          string
		node                          Node
		o                             Options
		noLeader, dial, attempt, poll time.Duration
	}{
		{"raft's timings", noLeaderNode{}, Options{}, DefaultNoLeaderWait, DefaultDialTimeout, DefaultAttemptTimeout, DefaultLeaderPoll},
		{"times 3", slowLinksNode{}, Options{}, 3 * DefaultNoLeaderWait, 3 * DefaultDialTimeout, 3 * DefaultAttemptTimeout, DefaultLeaderPoll},
		{"set by the caller", slowLinksNode{}, Options{NoLeaderWait: time.Second, DialTimeout: time.Second, AttemptTimeout: time.Second},
			time.Second, time.Second, time.Second, DefaultLeaderPoll},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.ResolveRPC, tt.o.Logger = resolve, testkit.Quiet()
			f, err := New(tt.node, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Shutdown()
			got := [4]time.Duration{f.o.NoLeaderWait, f.o.DialTimeout, f.o.AttemptTimeout, f.o.LeaderPoll}
			if want := [4]time.Duration{tt.noLeader, tt.dial, tt.attempt, tt.poll}; got != want {
				t.Errorf("no-leader wait, dial, attempt, poll = %v; want %v", got, want)
			}
		})
	}
}

// TestForwardInFlightWhenCutOff: a write forwarded to the leader just before this node was cut
// off from the quorum (a region cut on a WAN) gets no answer. It used to wait for its context
// (10 s through the admin API) and then answer outcome unknown; it now answers outcome unknown
// as soon as the node finds itself cut off and no quorum reachable (a second or two), naming
// the cut, and is not re-sent. The leader holds the write unanswered meanwhile.
func TestForwardInFlightWhenCutOff(t *testing.T) {
	c := startForwardCluster(t, 3, Options{})
	lead := c.ready(t)
	from := consensustest.Others(3, lead)[0]
	received := make(chan struct{}, 1)
	var hold grpc.UnaryServerInterceptor = func(ctx context.Context, _ any, _ *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
		received <- struct{}{}
		<-ctx.Done() // the answer never comes: the region was cut off
		return nil, ctx.Err()
	}
	c.hooks[lead].Store(&hold)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		_, err := c.fwd[from].Apply(ctx, fsm.Register{Spec: consensustest.Spec(t, 8011), Owner: "n1"})
		done <- result{err, time.Since(start)}
	}()
	<-received
	// The partition: raft's traffic both ways, and the other voters' RPC listeners.
	c.Isolate(from)
	dead := closedAddr(t)
	self := c.Nodes[from].ID()
	c.setOverride(func(id string) (string, bool, bool) { return dead, true, id != self })
	r := <-done
	if !errors.Is(r.err, consensus.ErrOutcomeUnknown) || errors.Is(r.err, consensus.ErrNoLeader) || !strings.Contains(r.err.Error(), "cut off") {
		t.Fatalf("a write in flight when its gateway was cut off: %v; want consensus.ErrOutcomeUnknown naming the cut (and not no-leader: it may have been written)", r.err)
	}
	if r.took > 5*time.Second {
		t.Errorf("it answered after %v; want once the node finds itself cut off, not when its context ends", r.took)
	}
	if n := c.calls[lead].Load(); n != 1 {
		t.Errorf("the leader received %d copies; want 1 (a cut-off node does not re-send)", n)
	}
	t.Logf("answered after %v: %v", r.took.Round(time.Millisecond), r.err)
}
