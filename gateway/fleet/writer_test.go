package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{consensus.ErrNoLeader, true},
		{&consensus.NotLeaderError{Leader: "n2"}, true},
		{consensus.ErrTimeout, true},
		{fmt.Errorf("%w: %w", consensus.ErrOutcomeUnknown, errors.New("leadership lost")), true},
		{fmt.Errorf("%w: %w", consensus.ErrOutcomeUnknown, consensus.ErrShutdown), false},
		{consensus.ErrShutdown, false},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{&fsm.ConflictError{Reason: "x"}, false},
		{&fsm.NotFoundError{ID: "w-1"}, false},
		{&fsm.InvalidError{Msg: "x"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			if got := Retryable(tt.err); got != tt.want {
				t.Errorf("Retryable = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRegisterAllWaitsForLeaderAndIsIdempotent: started before the node leads, RegisterAll
// retries until it can write; the same workers again are unchanged; a record an operator changed
// since is a conflict that keeps the record and its flags.
func TestRegisterAllWaitsForLeaderAndIsIdempotent(t *testing.T) {
	n := startNode(t, "n1", false)
	var logs logBuffer
	w := &Writer{Node: n, NodeID: "n1", Logger: logs.Logger(slog.LevelDebug)}
	a, b := spec(t, 8001), spec(t, 8002)
	ctx := context.Background()
	got := w.RegisterAll(ctx, []worker.Spec{a, b})
	if len(got) != 2 || got[0].Outcome != fsm.Created || got[1].Outcome != fsm.Created || got[0].Err != nil {
		t.Fatalf("first registration %+v", got)
	}
	// An operator disables a and changes b's priority.
	if _, err := w.Apply(ctx, fsm.SetFlags{ID: a.ID(), Flags: fsm.FlagChange{Disabled: ptr(true), By: "ops"}}); err != nil {
		t.Fatal(err)
	}
	b2 := b.Clone()
	b2.Priority = ptr(9)
	if _, err := w.Apply(ctx, fsm.ReplaceSpec{ID: b.ID(), Spec: b2, Flags: fsm.FlagChange{IsDead: ptr(true)}}); err != nil {
		t.Fatal(err)
	}
	got = w.RegisterAll(ctx, []worker.Spec{a, b})
	if got[0].Outcome != fsm.Unchanged || got[0].Err != nil || !errors.Is(got[1].Err, fsm.ErrConflict) {
		t.Fatalf("second registration %+v", got)
	}
	ra, _ := n.Worker(a.ID())
	rb, _ := n.Worker(b.ID())
	if !ra.Disabled || !rb.IsDead || rb.Spec.PriorityOrDefault() != 9 {
		t.Errorf("a registration changed an operator's record: a=%v b=%v", ra, rb)
	}
	if !strings.Contains(logs.String(), "level=INFO msg=\"kept the registered worker") {
		t.Errorf("no INFO line for the kept conflict:\n%s", logs.String())
	}
	// A DELETE drains a; a restart with the same command line does not bring it back.
	if _, err := w.Apply(ctx, fsm.Drain{ID: a.ID(), At: time.Now(), Settle: time.Minute}); err != nil {
		t.Fatal(err)
	}
	got = w.RegisterAll(ctx, []worker.Spec{a})
	if !errors.Is(got[0].Err, fsm.ErrConflict) {
		t.Fatalf("registering a draining worker: %+v", got)
	}
	if !strings.Contains(logs.String(), "did not register the worker again: a DELETE is draining it") {
		t.Errorf("no line for the draining worker:\n%s", logs.String())
	}
}

// stuck is an Applier with no leader, ever; it cancels its context at the limit-th call.
type stuck struct {
	calls  atomic.Int32
	limit  int32
	cancel context.CancelFunc
}

func (s *stuck) Apply(context.Context, fsm.Command) (fsm.Result, error) {
	if s.calls.Add(1) == s.limit {
		s.cancel()
	}
	return fsm.Result{}, consensus.ErrNoLeader
}

// TestRegisterAllRetriesUntilShutdown: with no leader, registration keeps trying, backing off
// exponentially up to a cap, until the gateway stops; it never gives up on its own.
func TestRegisterAllRetriesUntilShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	node := &stuck{limit: 200, cancel: cancel}
	var logs logBuffer
	var sl noSleep
	w := &Writer{Node: node, NodeID: "n1", Logger: logs.Logger(slog.LevelDebug), Sleep: sl.sleep}
	got := w.RegisterAll(ctx, []worker.Spec{spec(t, 8001)})
	if !errors.Is(got[0].Err, context.Canceled) && !errors.Is(got[0].Err, consensus.ErrNoLeader) || node.calls.Load() != node.limit {
		t.Fatalf("outcome %+v after %d attempts; want attempts until shutdown (%d)", got, node.calls.Load(), node.limit)
	}
	if sl.slept[0] != registerBackoff || sl.slept[1] != 2*registerBackoff || sl.slept[len(sl.slept)-1] != registerMaxBackoff {
		t.Errorf("backoffs %v", sl.slept)
	}
	for _, line := range []string{"waiting for raft to accept", "stopped registering worker: the gateway is stopping"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("no %q line:\n%s", line, logs.String())
		}
	}
	// A cancelled context stops at once.
	node.calls.Store(0)
	w.RegisterAll(ctx, []worker.Spec{spec(t, 8001), spec(t, 8002)})
	if node.calls.Load() > 1 {
		t.Errorf("%d attempts after cancel", node.calls.Load())
	}
}

// parallel is an Applier that records how many applies run at once.
type parallel struct {
	mu         sync.Mutex
	cur, peak  int
	registered map[worker.ID]bool
	release    chan struct{}
}

func (p *parallel) Apply(_ context.Context, cmd fsm.Command) (fsm.Result, error) {
	p.mu.Lock()
	p.cur++
	p.peak = max(p.peak, p.cur)
	p.mu.Unlock()
	<-p.release
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur--
	s := cmd.(fsm.Register).Spec
	p.registered[s.ID()] = true
	return fsm.Result{Outcome: fsm.Created}, nil
}

// TestRegisterAllRunsInParallel: the command line's workers are registered side by side, up to
// registerConcurrency at once, and every one of them is.
func TestRegisterAllRunsInParallel(t *testing.T) {
	node := &parallel{registered: map[worker.ID]bool{}, release: make(chan struct{})}
	w := &Writer{Node: node, NodeID: "n1", Logger: testkit.Quiet()}
	var specs []worker.Spec
	for i := range 50 {
		specs = append(specs, spec(t, 9000+i))
	}
	done := make(chan []RegisterOutcome)
	go func() { done <- w.RegisterAll(context.Background(), specs) }()
	testkit.For(t, "registerConcurrency registrations at once", func() bool {
		node.mu.Lock()
		defer node.mu.Unlock()
		return node.cur == registerConcurrency
	})
	close(node.release)
	got := <-done
	if node.peak != registerConcurrency || len(node.registered) != len(specs) {
		t.Fatalf("peak %d at once (want %d), %d of %d registered", node.peak, registerConcurrency, len(node.registered), len(specs))
	}
	for i, o := range got {
		if o.ID != specs[i].ID() || o.Outcome != fsm.Created {
			t.Errorf("outcome %d: %+v", i, o)
		}
	}
}

// TestOnRemoveIsFenced: health's removal removes the record only under this node's current
// epoch; a stale epoch leaves the record.
func TestOnRemoveIsFenced(t *testing.T) {
	n := startNode(t, "n1", true)
	var logs logBuffer
	w := &Writer{Node: n, NodeID: "n1", Logger: logs.Logger(slog.LevelDebug), Timeout: 5 * time.Second}
	a := spec(t, 8001)
	res, err := w.Apply(context.Background(), fsm.Register{Spec: a, Owner: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	epoch := res.Record.Epoch
	w.OnRemove(a.ID(), epoch+1, "failed")
	testkit.For(t, "the fenced refusal to be logged", func() bool { return strings.Contains(logs.String(), "no longer owns it") })
	if _, ok := n.Worker(a.ID()); !ok {
		t.Fatal("a stale epoch removed the record")
	}
	w.OnRemove(a.ID(), epoch, "failed")
	testkit.For(t, "the record to go", func() bool { _, ok := n.Worker(a.ID()); return !ok })
	testkit.For(t, "the removal to be logged", func() bool { return strings.Contains(logs.String(), "worker record removed") })
}

// flaky is an Applier without a leader for its first calls, then one that applies.
type flaky struct {
	Applier
	fails atomic.Int32
	calls atomic.Int32
}

func (f *flaky) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	if f.calls.Add(1) <= f.fails.Load() {
		return fsm.Result{}, consensus.ErrNoLeader
	}
	return f.Applier.Apply(ctx, cmd)
}

// TestOnRemoveRetriesUntilALeader: health's removal that finds no leader is retried until one
// commits it, not dropped; Close ends a removal that is still waiting.
func TestOnRemoveRetriesUntilALeader(t *testing.T) {
	n := startNode(t, "n1", true)
	node := &flaky{Applier: n}
	node.fails.Store(5)
	var logs logBuffer
	var sl noSleep
	w := &Writer{Node: node, NodeID: "n1", Logger: logs.Logger(slog.LevelDebug), Timeout: 5 * time.Second, Sleep: func(ctx context.Context, d time.Duration) error {
		_ = sl.sleep(ctx, d)
		return ctx.Err()
	}}
	a := spec(t, 8001)
	res, err := n.Apply(context.Background(), fsm.Register{Spec: a, Owner: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	w.OnRemove(a.ID(), res.Record.Epoch, "failed")
	testkit.For(t, "the record to go after the retries", func() bool { _, ok := n.Worker(a.ID()); return !ok })
	if got := node.calls.Load(); got != 6 {
		t.Errorf("%d attempts, want 6 (5 without a leader, then the one that commits)", got)
	}
	if !strings.Contains(logs.String(), "removing a worker record waits for raft") {
		t.Errorf("no waiting line:\n%s", logs.String())
	}
	w.Close()

	// A removal still waiting when the gateway stops ends with a line saying so.
	b := spec(t, 8002)
	res, err = n.Apply(context.Background(), fsm.Register{Spec: b, Owner: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	stuckW := &Writer{Node: &stuck{limit: -1}, NodeID: "n1", Logger: logs.Logger(slog.LevelDebug)}
	stuckW.OnRemove(b.ID(), res.Record.Epoch, "failed")
	stuckW.Close()
	if !strings.Contains(logs.String(), "the gateway is stopping") {
		t.Errorf("no stopping line:\n%s", logs.String())
	}
	if _, ok := n.Worker(b.ID()); !ok {
		t.Error("a removal that never found a leader removed the record")
	}
}
