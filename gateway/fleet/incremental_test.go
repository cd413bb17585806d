package fleet

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// TestReconcileIncremental: after the first pass, a pass reads only the records changed since
// the last one; it falls back to reading every record when the changes cannot be named, and
// only such a full pass sweeps pool workers that have no record.
func TestReconcileIncremental(t *testing.T) {
	recs := newFakeRecords()
	var swaps atomic.Int32
	p := pool.New(pool.Config{OnChange: func() { swaps.Add(1) }})
	owner := &fakeOwner{}
	r := New(Config{NodeID: "n1", Records: recs, Pool: p, Owner: owner, Logger: testkit.Quiet()})
	specs := make([]worker.Spec, 100)
	for i := range specs {
		specs[i] = spec(t, 9000+i)
		recs.put(fsm.Record{ID: specs[i].ID(), Spec: specs[i], Owner: "n1", Epoch: 1})
	}
	ida, idb := specs[0].ID(), specs[1].ID()
	stray := spec(t, 8999)
	type reads struct{ Full, Changed int }
	steps := []struct {
		name      string
		change    func()
		want      reads
		wantSwaps int32
		check     func() bool
	}{
		// The first pass also gets the changes since version 0, which it does not need.
		{"first pass reads every record", func() {}, reads{Full: 1, Changed: 100}, 1,
			func() bool { return len(p.Snapshot().All) == 100 }},
		{"nothing new reads nothing", func() {}, reads{}, 0, nil},
		{"one change reads one record", func() {
			recs.update(ida, func(r *fsm.Record) { r.Spec.Priority = ptr(3) })
		}, reads{Changed: 1}, 1, func() bool { s := p.Get(ida).Spec(); return s.PriorityOrDefault() == 3 }},
		{"a removal and a stray worker", func() {
			recs.remove(idb)
			if _, _, err := p.Upsert(stray, pool.OriginLocal); err != nil {
				t.Fatal(err)
			}
		}, reads{Changed: 1}, 1,
			func() bool { return p.Get(idb) == nil && p.Get(stray.ID()) != nil }},
		{"changes that cannot be named", func() {
			recs.update(ida, func(r *fsm.Record) { r.Disabled = true })
			recs.forget()
		}, reads{Full: 1}, 1, func() bool {
			return p.Get(ida).Gates() == pool.GateDisabled && p.Get(stray.ID()) == nil && len(p.Snapshot().All) == 99
		}},
		{"back to incremental", func() {
			recs.update(ida, func(r *fsm.Record) { r.Owner, r.Epoch = "n2", 2 })
		}, reads{Changed: 1}, 1, func() bool { return p.Get(ida).Owner() == "n2" }},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.change()
			recs.reads()
			swaps.Store(0)
			r.Reconcile()
			full, changed := recs.reads()
			if got := (reads{Full: full, Changed: changed}); got != st.want {
				t.Errorf("the pass read %+v, want %+v", got, st.want)
			}
			if got := swaps.Load(); got != st.wantSwaps {
				t.Errorf("%d snapshot swaps, want %d", got, st.wantSwaps)
			}
			if st.check != nil && !st.check() {
				t.Errorf("pool %+v", viewOf(p))
			}
		})
	}
	calls := owner.take()
	if want := []call{{Op: "disown", ID: idb}, {Op: "disown", ID: ida}}; len(calls) != 100+1+2 || !cmp.Equal(calls[101:], want) {
		t.Errorf("owner calls %+v; want 100 owns, the priority change's, %+v", calls, want)
	}
}

// panicOwner panics at its first Own after armed is set.
type panicOwner struct {
	fakeOwner
	armed atomic.Bool
}

func (o *panicOwner) Own(s worker.Spec, epoch uint64, dead bool) {
	if o.armed.Swap(false) {
		panic("owner failed")
	}
	o.fakeOwner.Own(s, epoch, dead)
}

// TestReconcileAfterPanic: a pass that panicked half way is followed by a full pass, which
// applies what it did not.
func TestReconcileAfterPanic(t *testing.T) {
	recs := newFakeRecords()
	p := pool.New(pool.Config{})
	owner := &panicOwner{}
	r := New(Config{NodeID: "n1", Records: recs, Pool: p, Owner: owner, Logger: testkit.Quiet()})
	r.Reconcile()
	a := spec(t, 8001)
	recs.put(fsm.Record{ID: a.ID(), Spec: a, Owner: "n1", Epoch: 1})
	owner.armed.Store(true)
	r.Reconcile() // panics in Own, recovers
	recs.reads()
	r.Reconcile()
	if full, _ := recs.reads(); full != 1 {
		t.Errorf("the pass after a panic read every record %d times, want 1", full)
	}
	if calls := owner.take(); len(calls) != 1 || calls[0].ID != a.ID() {
		t.Errorf("owner calls %+v, want one Own of %s", calls, a.ID())
	}
}

// countingFSM is an FSM that counts full reads.
type countingFSM struct {
	*fsm.FSM
	full int
}

func (c *countingFSM) WorkersShared() []fsm.Record {
	c.full++
	return c.FSM.WorkersShared()
}

// workerView is everything a test compares of a pool worker.
type workerView struct {
	Origin, Owner, APIKey string
	Gates                 pool.Gate
	Spec                  worker.Spec
}

func fullView(p *pool.Pool) map[worker.ID]workerView {
	out := map[worker.ID]workerView{}
	for _, w := range p.Snapshot().All {
		out[w.ID] = workerView{Origin: w.Origin, Owner: w.Owner(), APIKey: w.APIKey(), Gates: w.Gates(), Spec: w.Spec()}
	}
	return out
}

// ownedBy folds Own and Disown calls into the checks they leave running.
func ownedBy(owned map[worker.ID]call, calls []call) map[worker.ID]call {
	for _, c := range calls {
		if c.Op == "own" {
			owned[c.ID] = c
		} else {
			delete(owned, c.ID)
		}
	}
	return owned
}

// TestReconcileIncrementalMatchesFullPass drives a real FSM through random commands, with
// bursts of thousands of changes and restores of an older snapshot, and a reconciler through a
// pass after each round; after every round, the pool, the owned checks and what the reconciler
// remembers equal what a fresh reconciler's full pass makes of the same records. Only the first
// pass and the restores need a full pass: a burst costs an incremental one.
func TestReconcileIncrementalMatchesFullPass(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	f := &countingFSM{FSM: fsm.New(testkit.Quiet())}
	p := pool.New(pool.Config{})
	owner := &fakeOwner{}
	r := New(Config{NodeID: "n1", Records: f, Pool: p, Owner: owner, Logger: testkit.Quiet()})
	owned := map[worker.ID]call{}
	nodes := []string{"n1", "n2", "n3"}
	variant := func(port int) worker.Spec {
		return spec(t, port, func(s *worker.Spec) {
			s.Priority, s.APIKey = ptr(1+rng.IntN(3)), fmt.Sprint("sk-", rng.IntN(3))
		})
	}
	var index uint64
	applyCmd := func(c fsm.Command) {
		data, err := fsm.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		index++
		f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
	}
	random := func() {
		port := 9100 + rng.IntN(30)
		base := spec(t, port)
		id := base.ID()
		rec, _ := f.Worker(id)
		switch rng.IntN(9) {
		case 0, 1:
			applyCmd(fsm.Register{Spec: variant(port), Owner: nodes[rng.IntN(3)], At: time.Unix(int64(index), 0)})
		case 2:
			applyCmd(fsm.ReplaceSpec{ID: id, Spec: variant(port)})
		case 3, 4:
			applyCmd(fsm.SetFlags{ID: id, Flags: fsm.FlagChange{
				Disabled: ptr(rng.IntN(2) == 0), Reason: "r", By: "t", IsDead: ptr(rng.IntN(3) == 0)}})
		case 5:
			applyCmd(fsm.Remove{ID: id})
		case 6:
			applyCmd(fsm.Remove{ID: id, Fence: &fsm.Fence{Owner: rec.Owner, Epoch: rec.Epoch + uint64(rng.IntN(2))}})
		default:
			applyCmd(fsm.Transfer{ID: id, To: nodes[rng.IntN(3)]})
		}
	}
	snaps := raft.NewInmemSnapshotStore()
	takeSnapshot := func() {
		s, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Persist(sink); err != nil {
			t.Fatal(err)
		}
	}
	restore := func() {
		metas, err := snaps.List()
		if err != nil || len(metas) != 1 {
			t.Fatalf("snapshots %v, %v", metas, err)
		}
		_, rc, err := snaps.Open(metas[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Restore(rc); err != nil {
			t.Fatal(err)
		}
	}
	const rounds, burst = 200, 4096 // more record changes than the FSM's change log once held
	wantFull := 1
	for round := range rounds {
		switch round {
		case 40, 120:
			takeSnapshot()
		case 60, 160:
			for v := f.Version(); f.Version()-v <= burst; {
				random()
			}
		case 90, 180:
			restore()
			wantFull++
		default:
			for range rng.IntN(12) {
				random()
			}
		}
		r.Reconcile()
		ownedBy(owned, owner.take())

		fresh, freshOwner := pool.New(pool.Config{}), &fakeOwner{}
		ref := New(Config{NodeID: "n1", Records: f.FSM, Pool: fresh, Owner: freshOwner, Logger: testkit.Quiet()})
		ref.Reconcile()
		if diff := cmp.Diff(fullView(fresh), fullView(p)); diff != "" {
			t.Fatalf("round %d: pool (-full pass +incremental):\n%s", round, diff)
		}
		if diff := cmp.Diff(ownedBy(map[worker.ID]call{}, freshOwner.take()), owned); diff != "" {
			t.Fatalf("round %d: owned checks (-full pass +incremental):\n%s", round, diff)
		}
		if diff := cmp.Diff(ref.seen, r.seen, cmp.AllowUnexported(applied{})); diff != "" {
			t.Fatalf("round %d: remembered records (-full pass +incremental):\n%s", round, diff)
		}
	}
	if f.full != wantFull {
		t.Errorf("%d full passes in %d rounds, want %d (the first, and after each restore)", f.full, rounds, wantFull)
	}
	if len(p.Snapshot().All) == 0 {
		t.Error("the run ended with no worker: it tested little")
	}
}
