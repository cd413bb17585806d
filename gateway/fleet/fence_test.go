package fleet

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// TestReconcileFencesWhileHeld: while raft state is not current, what raft applies reaches no
// pass, but every worker whose applied record names another owner, or is gone, is disowned at
// once, and nothing else is told the owner: no Own of a worker that became this gateway's, no
// Disown of one moved away and back. The pool keeps the restored state until CaughtUp closes,
// and the pass then owns what is this gateway's and disowns nothing twice.
func TestReconcileFencesWhileHeld(t *testing.T) {
	recs := newFakeRecords()
	p := pool.New(pool.Config{})
	owner := &fakeOwner{}
	caughtUp := make(chan struct{})
	var logs logBuffer
	r := New(Config{NodeID: "n1", Records: recs, Pool: p, Owner: owner, CaughtUp: caughtUp, Logger: logs.Logger(slog.LevelInfo)})
	moved, removed, back, gained, forgotten := spec(t, 8001), spec(t, 8002), spec(t, 8003), spec(t, 8004), spec(t, 8005)
	for _, s := range []worker.Spec{moved, removed, back, forgotten} {
		recs.put(fsm.Record{ID: s.ID(), Spec: s, Owner: "n1", Epoch: 1})
	}
	recs.put(fsm.Record{ID: gained.ID(), Spec: gained, Owner: "n2", Epoch: 1})
	r.Start() // the restored state; no signal reaches the loop below, the test fences itself
	defer r.Stop()
	if got := len(owner.take()); got != 4 {
		t.Fatalf("the restored state owned %d workers, want 4", got)
	}

	// Raft replays: one worker moves to n2, one is removed, one moves to n3 and back, and one
	// moves here.
	recs.update(moved.ID(), func(r *fsm.Record) { r.Owner, r.Epoch = "n2", 2 })
	recs.remove(removed.ID())
	recs.update(back.ID(), func(r *fsm.Record) { r.Owner, r.Epoch = "n3", 2 })
	recs.update(back.ID(), func(r *fsm.Record) { r.Owner, r.Epoch = "n1", 3 })
	recs.update(gained.ID(), func(r *fsm.Record) { r.Owner, r.Epoch = "n1", 2 })
	r.fence()
	want := []call{{Op: "disown", ID: moved.ID()}, {Op: "disown", ID: removed.ID()}}
	sortCalls := cmpopts.SortSlices(func(a, b call) bool { return a.ID < b.ID })
	if diff := cmp.Diff(want, owner.take(), sortCalls); diff != "" {
		t.Errorf("owner calls while held (-want +got):\n%s", diff)
	}
	r.fence() // nothing new: nothing told
	if got := owner.take(); len(got) != 0 {
		t.Errorf("a fence without changes told the owner %+v", got)
	}
	if w := p.Get(moved.ID()); w == nil || w.Owner() != "n1" || p.Get(removed.ID()) == nil {
		t.Error("the pool left the restored state before raft state was current")
	}

	// A change the records cannot name (a restored snapshot) is fenced from every record.
	recs.update(forgotten.ID(), func(r *fsm.Record) { r.Owner, r.Epoch = "n3", 2 })
	recs.forget()
	r.fence()
	if diff := cmp.Diff([]call{{Op: "disown", ID: forgotten.ID()}}, owner.take()); diff != "" {
		t.Errorf("owner calls after a restore (-want +got):\n%s", diff)
	}
	for _, line := range []string{"worker owned elsewhere now, while raft state is not current", "worker record removed while raft state is not current"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("no %q line in the log:\n%s", line, logs.String())
		}
	}

	close(caughtUp)
	testkit.For(t, "the caught-up pass", func() bool { return p.Get(removed.ID()) == nil })
	want = []call{{Op: "own", ID: back.ID(), Epoch: 3}, {Op: "own", ID: gained.ID(), Epoch: 2}}
	if diff := cmp.Diff(want, owner.take(), sortCalls); diff != "" {
		t.Errorf("owner calls once caught up (-want +got):\n%s", diff)
	}
	if w := p.Get(moved.ID()); w == nil || w.Owner() != "n2" || w.Origin != pool.OriginMesh {
		t.Errorf("once caught up, the moved worker is %v in the pool", w)
	}
}
