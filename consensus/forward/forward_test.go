package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/consensus/fsm"
)

// fwdCluster is a cluster on raft's in-memory transport with a real gRPC server per node on
// 127.0.0.1, and a Forwarder per node resolving node ids to those servers.
type fwdCluster struct {
	*cluster
	addrs   []string
	servers []*grpc.Server
	calls   []atomic.Int64 // Forward RPCs each server received
	hooks   []atomic.Pointer[grpc.UnaryServerInterceptor]
	fwd     []*Forwarder

	mu       sync.Mutex
	override func(id string) (string, bool, bool) // (addr, ok, handled)
}

func startForwardCluster(t *testing.T, size int, o ForwardOptions) *fwdCluster {
	t.Helper()
	c := &fwdCluster{
		cluster: startCluster(t, size),
		calls:   make([]atomic.Int64, size),
		hooks:   make([]atomic.Pointer[grpc.UnaryServerInterceptor], size),
	}
	for i, n := range c.nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			c.calls[i].Add(1)
			if hook := c.hooks[i].Load(); hook != nil {
				return (*hook)(ctx, req, info, h)
			}
			return h(ctx, req)
		}))
		n.RegisterForward(s)
		served := make(chan struct{})
		go func() { defer close(served); _ = s.Serve(ln) }()
		t.Cleanup(func() { s.Stop(); <-served })
		c.addrs = append(c.addrs, ln.Addr().String())
		c.servers = append(c.servers, s)
	}
	o.ResolveRPC = c.resolve
	for _, n := range c.nodes {
		f, err := NewForwarder(n, o)
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
	for i, n := range c.nodes {
		if n.ID() == id {
			return c.addrs[i], true
		}
	}
	return "", false
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
	all := others(len(c.nodes), -1)
	lead := c.waitLeader(t, all...)
	waitFor(t, "the cluster id on every node", func() bool {
		for _, n := range c.nodes {
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
	c := startForwardCluster(t, 3, ForwardOptions{})
	lead := c.ready(t)
	leader, fi := c.nodes[lead], others(3, lead)[0]
	f := c.fwd[fi]
	ctx := testCtx(t)
	a := spec(t, 8001)
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
		waitApplied(t, c.nodes, res.Index)
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
	c := startForwardCluster(t, 3, ForwardOptions{})
	lead := c.ready(t)
	rest := others(3, lead)
	from, stale := rest[0], rest[1]
	leaderID := c.nodes[lead].ID()
	ctx := testCtx(t)
	before := c.nodes[lead].AppliedIndex()

	// Every lookup of the leader gives the follower's address: a loop, cut after MaxHops.
	c.setOverride(func(id string) (string, bool, bool) { return c.addrs[stale], true, id == leaderID })
	_, err := c.fwd[from].Apply(ctx, fsm.Register{Spec: spec(t, 8002), Owner: "n1"})
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != leaderID {
		t.Fatalf("a circle of NotLeader answers: %v; want *NotLeaderError naming %s", err, leaderID)
	}
	if got := c.callCounts(); got[stale] != DefaultForwardHops || got[lead] != 0 || got[from] != 0 {
		t.Fatalf("forward RPCs per node %v; want %d on node %d only", got, DefaultForwardHops, stale)
	}
	if c.nodes[lead].AppliedIndex() != before {
		t.Fatal("a refused write was applied")
	}

	// A stale lookup once: the follower's NotLeader answer leads to the leader.
	var once atomic.Bool
	c.setOverride(func(id string) (string, bool, bool) {
		return c.addrs[stale], true, id == leaderID && once.CompareAndSwap(false, true)
	})
	res, err := c.fwd[from].Apply(ctx, fsm.Register{Spec: spec(t, 8002), Owner: "n1"})
	if err != nil || res.Outcome != fsm.Created {
		t.Fatalf("after one NotLeader answer: %+v, %v", res, err)
	}
	if got := c.callCounts(); got[stale] != DefaultForwardHops+1 || got[lead] != 1 {
		t.Fatalf("forward RPCs per node %v", got)
	}
}

// TestForwardFollowsNewLeader isolates the leader: writes through a remaining follower reach
// the new leader, and after healing the old leader's forwarder reaches whoever leads.
func TestForwardFollowsNewLeader(t *testing.T) {
	c := startForwardCluster(t, 3, ForwardOptions{})
	lead := c.ready(t)
	rest := others(3, lead)
	ctx := testCtx(t)
	if _, err := c.fwd[rest[0]].Apply(ctx, fsm.Register{Spec: spec(t, 8003), Owner: "n1"}); err != nil {
		t.Fatal(err)
	}

	c.isolate(lead)
	newLead := c.waitLeader(t, rest...)
	follower := rest[0]
	if follower == newLead {
		follower = rest[1]
	}
	before := c.calls[newLead].Load()
	res, err := c.fwd[follower].Apply(ctx, fsm.Register{Spec: spec(t, 8004), Owner: "n1"})
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

	c.heal()
	c.waitLeader(t, 0, 1, 2)
	res, err = c.fwd[lead].Apply(ctx, fsm.Register{Spec: spec(t, 8005), Owner: "n1"})
	if err != nil || res.Outcome != fsm.Created {
		t.Fatalf("write from the healed old leader: %+v, %v", res, err)
	}
	waitApplied(t, c.nodes, res.Index)
	for _, n := range c.nodes {
		if len(n.Workers()) != 3 {
			t.Fatalf("%s holds %d records; want 3", n.ID(), len(n.Workers()))
		}
	}
}

// TestForwardNoLeader cuts every node off: a write fails with ErrNoLeader after
// NoLeaderWait, or sooner when its context ends first.
func TestForwardNoLeader(t *testing.T) {
	c := startForwardCluster(t, 3, ForwardOptions{})
	c.ready(t)
	c.isolate(0)
	c.isolate(1)
	waitFor(t, "no node to know a leader", func() bool {
		for _, n := range c.nodes {
			if _, id := n.raft.LeaderWithID(); n.IsLeader() || id != "" {
				return false
			}
		}
		return true
	})
	tests := []struct {
		name    string
		timeout time.Duration
		min     time.Duration
		max     time.Duration
		ctxErr  bool
	}{
		{"bounded by NoLeaderWait", 10 * time.Second, DefaultNoLeaderWait, DefaultNoLeaderWait + time.Second, false},
		{"bounded by the context", 300 * time.Millisecond, 300 * time.Millisecond, time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			start := time.Now()
			_, err := c.fwd[2].Apply(ctx, fsm.Register{Spec: spec(t, 8006), Owner: "n1"})
			took := time.Since(start)
			if !errors.Is(err, ErrNoLeader) || errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, context.DeadlineExceeded) != tt.ctxErr {
				t.Fatalf("Apply without a leader: %v", err)
			}
			if took < tt.min || took > tt.max {
				t.Fatalf("took %v; want between %v and %v", took, tt.min, tt.max)
			}
		})
	}
	if got := c.callCounts(); got[0]+got[1]+got[2] != 0 {
		t.Fatalf("forward RPCs without a leader: %v", got)
	}
}

// TestForwardLeaderUnreachable: no RPC address, or one nothing listens on, means nothing was
// written, and ErrNoLeader once NoLeaderWait has passed.
func TestForwardLeaderUnreachable(t *testing.T) {
	c := startForwardCluster(t, 3, ForwardOptions{NoLeaderWait: 300 * time.Millisecond})
	lead := c.ready(t)
	leaderID := c.nodes[lead].ID()
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
			before := c.nodes[lead].AppliedIndex()
			_, err := c.fwd[others(3, lead)[0]].Apply(testCtx(t), fsm.Register{Spec: spec(t, 8007), Owner: "n1"})
			var ue *LeaderUnreachableError
			if !errors.As(err, &ue) || !errors.Is(err, ErrNoLeader) || ue.Leader != leaderID || ue.Address != tt.addr {
				t.Fatalf("unreachable leader: %v; want *LeaderUnreachableError", err)
			}
			if c.nodes[lead].AppliedIndex() != before {
				t.Fatal("something was written")
			}
		})
	}
}

// TestForwardLeaderDiesMidCall stops the leader's gRPC server while it holds the request:
// before or after applying it, the caller cannot tell, so both are ErrOutcomeUnknown.
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
			c := startForwardCluster(t, 3, ForwardOptions{})
			lead := c.ready(t)
			leader := c.nodes[lead]
			var hook grpc.UnaryServerInterceptor = func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				var resp any
				var err error
				if tt.applies {
					resp, err = h(ctx, req)
				}
				c.servers[lead].Stop() // closes the connection before the answer is written
				return resp, err
			}
			c.hooks[lead].Store(&hook)
			a := spec(t, 8008)
			from := others(3, lead)[0]
			_, err := c.fwd[from].Apply(testCtx(t), fsm.Register{Spec: a, Owner: "n1"})
			if err == nil && !c.nodes[lead].IsLeader() {
				// Under load an election can move the leadership meanwhile: the re-sent register,
				// idempotent, is then answered by the new leader, and that answer is the write's.
				t.Logf("leadership moved during the call; the re-sent write was answered")
				waitFor(t, "the record on the writer", func() bool { _, ok := c.nodes[from].Worker(a.ID()); return ok })
				return
			}
			if !errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("leader died mid-call: %v; want ErrOutcomeUnknown", err)
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
	c := startForwardCluster(t, 3, ForwardOptions{})
	lead := c.ready(t)
	cc, err := grpc.NewClient(c.addrs[lead], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	client := consensusv1.NewForwardClient(cc)
	good, err := fsm.Encode(fsm.Register{Spec: spec(t, 8009), Owner: "n1"})
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
			before := c.nodes[lead].AppliedIndex()
			a, err := client.Apply(testCtx(t), &consensusv1.ApplyRequest{Entry: tt.entry, From: "test"})
			if err != nil || a.Status != tt.want {
				t.Fatalf("answer %v, %v; want %s", a, err, tt.want)
			}
			if applied := c.nodes[lead].AppliedIndex() != before; applied != (tt.want == consensusv1.ApplyStatus_APPLY_STATUS_APPLIED) {
				t.Fatalf("applied: %v", applied)
			}
		})
	}
	// A follower's service answers NotLeader for a good entry, naming the leader.
	fc, err := grpc.NewClient(c.addrs[others(3, lead)[0]], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fc.Close() }()
	a, err := consensusv1.NewForwardClient(fc).Apply(testCtx(t), &consensusv1.ApplyRequest{Entry: good})
	if err != nil || a.Status != consensusv1.ApplyStatus_APPLY_STATUS_NOT_LEADER || a.LeaderId != c.nodes[lead].ID() ||
		a.LeaderAddress != c.nodes[lead].Address() {
		t.Fatalf("follower's answer %v, %v", a, err)
	}
}

func TestForwarderShutdown(t *testing.T) {
	c := startForwardCluster(t, 3, ForwardOptions{})
	lead := c.ready(t)
	f := c.fwd[others(3, lead)[0]]
	if _, err := f.Apply(testCtx(t), fsm.Register{Spec: spec(t, 8010), Owner: "n1"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Apply(testCtx(t), fsm.Register{Spec: spec(t, 8011), Owner: "n1"}); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Apply after Shutdown: %v; want ErrShutdown", err)
	}
	if _, err := NewForwarder(c.nodes[0], ForwardOptions{}); err == nil {
		t.Fatal("a forwarder without a resolver")
	}
}
