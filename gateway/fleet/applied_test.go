package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/test/testkit"
)

// waitApplied runs WaitApplied bounded by d.
func waitApplied(r *Reconciler, index uint64, d time.Duration) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return r.WaitApplied(ctx, index)
}

// The pool's applied index follows raft only once the state is current, is published with the
// pass that applied it, and reaches the index of an entry that changed nothing: woken by the
// FSM's applied signal (as a gateway runs it), or by the poll without one.
func TestReconcilerWaitApplied(t *testing.T) {
	for _, signal := range []bool{true, false} {
		name := "applied signal"
		if !signal {
			name = "poll"
		}
		t.Run(name, func(t *testing.T) { testReconcilerWaitApplied(t, signal) })
	}
}

func testReconcilerWaitApplied(t *testing.T, signal bool) {
	n := startNode(t, "n1", true)
	p := pool.New(pool.Config{})
	caughtUp := make(chan struct{})
	cfg := Config{NodeID: "n1", Records: n, Pool: p, CaughtUp: caughtUp, AppliedIndex: n.AppliedIndex, Logger: testkit.Quiet()}
	if signal {
		cfg.AppliedSignal = n.AppliedSignal
	}
	r := New(cfg)
	r.Start()
	defer r.Stop()
	s := spec(t, 8001)
	ctx := context.Background()

	reg, err := n.Apply(ctx, fsm.Register{Spec: s, Owner: "n2", At: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if got := waitApplied(r, reg.Index, 50*time.Millisecond); got >= reg.Index {
		t.Fatalf("before the state is current the pool applied %d, want below %d", got, reg.Index)
	}
	if p.Get(s.ID()) != nil {
		t.Fatal("the pool holds a worker registered before the state was current")
	}

	close(caughtUp)
	if got := waitApplied(r, reg.Index, 5*time.Second); got < reg.Index {
		t.Fatalf("the pool applied %d, want %d", got, reg.Index)
	}
	if p.Get(s.ID()) == nil {
		t.Fatal("the pool acknowledged the registration without the worker")
	}

	tests := []struct {
		name string
	}{
		{"a disable"},
		{"the same disable again, which changes nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := n.Apply(ctx, fsm.SetFlags{ID: s.ID(), Flags: fsm.FlagChange{Disabled: ptr(true), At: time.Unix(2, 0)}})
			if err != nil {
				t.Fatal(err)
			}
			if got := waitApplied(r, res.Index, 5*time.Second); got < res.Index {
				t.Fatalf("the pool applied %d, want %d (outcome %s)", got, res.Index, res.Outcome)
			}
			if w := p.Get(s.ID()); w == nil || w.Gates()&pool.GateDisabled == 0 {
				t.Fatal("the pool acknowledged the disable with the worker's gate open")
			}
			if got := r.AppliedIndex(); got < res.Index {
				t.Fatalf("AppliedIndex %d, want %d", got, res.Index)
			}
		})
	}
}

// Without AppliedIndex configured, nothing is ever reached: a write waits its bound and lags.
func TestReconcilerWaitAppliedUnconfigured(t *testing.T) {
	n := startNode(t, "n1", true)
	r := New(Config{NodeID: "n1", Records: n, Pool: pool.New(pool.Config{}), Logger: testkit.Quiet()})
	r.Start()
	defer r.Stop()
	if got := waitApplied(r, 1, 20*time.Millisecond); got != 0 {
		t.Fatalf("WaitApplied = %d, want 0", got)
	}
}
