package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// passing is a prober whose every probe passes.
type passing struct{}

func (passing) Probe(context.Context, health.Target) error { return nil }

// ownerGateway is what a gateway runs for the workers it owns, over a raft node: the pool, the
// health manager, the reconciler and the writer of its removals. stop ends it as a crash does,
// keeping the raft state.
type ownerGateway struct {
	pool *pool.Pool
	r    *Reconciler
	stop func()
}

func startOwnerGateway(t *testing.T, n *consensus.Node, nodeID string) *ownerGateway {
	t.Helper()
	p := pool.New(pool.Config{StartPending: true})
	w := &Writer{Node: n, NodeID: nodeID, Logger: testkit.Quiet()}
	m, err := owned.New(owned.Options{Pool: p, NodeID: nodeID, Health: health.DefaultConfig(), Breaker: breaker.DefaultConfig(),
		Logger: testkit.Quiet(), OnRemove: w.OnRemove, Probers: map[string]health.Prober{worker.ModeHTTP: passing{}}})
	if err != nil {
		t.Fatal(err)
	}
	r := New(Config{NodeID: nodeID, Records: n, Pool: p, Owner: m, AppliedIndex: n.AppliedIndex, Logger: testkit.Quiet()})
	r.Start()
	g := &ownerGateway{pool: p, r: r}
	g.stop = func() { r.Stop(); m.Close(); w.Close() }
	t.Cleanup(func() { g.stop() })
	return g
}

// TestDrainKeptInRaft: a DELETE's drain is a record state, not a goroutine. The owner removes
// a draining record once its settle has passed since the drain started, never before, and the
// worker is out of the routable view from the moment the drain applied; an owner that was down
// when the settle ended (a crash, a restart) removes it when it comes back; a record another
// gateway owns is left to that owner.
func TestDrainKeptInRaft(t *testing.T) {
	n := startNode(t, "n1", true)
	ctx := context.Background()
	w := &Writer{Node: n, NodeID: "n1", Logger: testkit.Quiet()}
	defer w.Close()
	register := func(port int, owner string) worker.ID {
		t.Helper()
		s := spec(t, port, func(s *worker.Spec) { s.Model = "m" }) // a declared model: no discovery
		if _, err := w.Apply(ctx, fsm.Register{Spec: s, Owner: owner, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		return s.ID()
	}
	drain := func(id worker.ID, at time.Time, settle time.Duration) fsm.Result {
		t.Helper()
		res, err := w.Apply(ctx, fsm.Drain{ID: id, At: at, Settle: settle})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	gone := func(id worker.ID) bool { _, ok := n.Worker(id); return !ok }

	g := startOwnerGateway(t, n, "n1")
	a := register(8001, "n1")
	testkit.For(t, "the owned worker to be routable", func() bool { return len(g.pool.Snapshot().Routable) == 1 })

	const settle = 300 * time.Millisecond
	start := time.Now()
	res := drain(a, start, settle)
	if !res.Record.Draining || !res.Record.DrainDeadline().Equal(start.Add(settle)) {
		t.Fatalf("drain result %+v", res.Record)
	}
	// What a fleet acknowledgement waits for: the pool published the drain's index.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if got := g.r.WaitApplied(wctx, res.Index); got < res.Index {
		t.Fatalf("the pool applied index %d, not the drain's %d", got, res.Index)
	}
	if len(g.pool.Snapshot().Routable) != 0 || g.pool.Get(a).Gates()&pool.GateRemoving == 0 || gone(a) {
		t.Fatalf("right after the drain: routable %d, record gone %v", len(g.pool.Snapshot().Routable), gone(a))
	}
	if again := drain(a, time.Now(), time.Hour); again.Outcome != fsm.Unchanged || !again.Record.DrainDeadline().Equal(start.Add(settle)) {
		t.Errorf("a second drain moved the deadline: %v %+v", again.Outcome, again.Record)
	}
	testkit.For(t, "the owner to remove the drained record", func() bool { return gone(a) })
	if took := time.Since(start); took < settle {
		t.Errorf("removed %v after the drain started, before its %v settle", took, settle)
	}

	// The owner is down while a drain's settle passes: nothing removes the record until it is
	// back, and then it does at once. A draining record owned elsewhere stays.
	b := register(8002, "n1")
	c := register(8003, "n2")
	testkit.For(t, "the owned worker to be routable", func() bool { return len(g.pool.Snapshot().Routable) == 1 })
	g.stop()
	drain(b, time.Now().Add(-time.Minute), settle)
	drain(c, time.Now().Add(-time.Minute), settle)
	if gone(b) || gone(c) {
		t.Fatal("a draining record was removed while its owner was down")
	}
	restarted := startOwnerGateway(t, n, "n1")
	testkit.For(t, "the restarted owner to finish the drain", func() bool { return gone(b) })
	if w := restarted.pool.Get(c); gone(c) || w == nil || w.Gates()&pool.GateRemoving == 0 {
		t.Errorf("the record owned by n2: gone %v, pool worker %v", gone(c), w)
	}
}
