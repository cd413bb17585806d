package fleet

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// fakeRecords is a Records whose state the test sets. Each put or remove is a version, and
// ChangedSince names them all, unless forget was called since.
type fakeRecords struct {
	mu      sync.Mutex
	recs    map[worker.ID]fsm.Record
	version uint64
	changed map[worker.ID]uint64 // id -> version of its last change
	reset   uint64               // ChangedSince is not ok for a version below
	watch   chan struct{}
	// fullReads and changedReads count the WorkersShared calls and the records ChangedSince
	// returned.
	fullReads, changedReads int
}

func newFakeRecords() *fakeRecords {
	return &fakeRecords{recs: map[worker.ID]fsm.Record{}, changed: map[worker.ID]uint64{}, watch: make(chan struct{}, 1)}
}

func (f *fakeRecords) WorkersShared() []fsm.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fullReads++
	var out []fsm.Record
	for _, r := range f.recs {
		out = append(out, r.Clone())
	}
	return out
}

func (f *fakeRecords) ChangedSince(v uint64) (fsm.Changes, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := fsm.Changes{Now: f.version}
	if v < f.reset || v > f.version {
		return ch, false
	}
	for id, at := range f.changed {
		if at <= v {
			continue
		}
		if r, ok := f.recs[id]; ok {
			ch.Workers = append(ch.Workers, r.Clone())
		} else {
			ch.Removed = append(ch.Removed, id)
		}
	}
	f.changedReads += len(ch.Workers) + len(ch.Removed)
	return ch, true
}

// forget makes the next ChangedSince not ok, as a restored snapshot does.
func (f *fakeRecords) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version++
	f.reset = f.version
}

// reads returns the full reads and the changed records read so far, and zeroes them.
func (f *fakeRecords) reads() (full, changed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	full, changed = f.fullReads, f.changedReads
	f.fullReads, f.changedReads = 0, 0
	return full, changed
}

func (f *fakeRecords) Watch() (<-chan struct{}, func()) { return f.watch, func() {} }

// signal is the coalesced Watch signal of a change.
func (f *fakeRecords) signal() {
	select {
	case f.watch <- struct{}{}:
	default:
	}
}

// put stores rec with a new revision, as every raft update does.
func (f *fakeRecords) put(rec fsm.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version++
	rec.Revision = f.version
	f.recs[rec.ID] = rec
	f.changed[rec.ID] = f.version
}

func (f *fakeRecords) update(id worker.ID, change func(*fsm.Record)) {
	f.mu.Lock()
	r := f.recs[id]
	f.mu.Unlock()
	change(&r)
	f.put(r)
}

func (f *fakeRecords) remove(id worker.ID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version++
	delete(f.recs, id)
	f.changed[id] = f.version
}

// poolView is what a test compares of a pool worker.
type poolView struct {
	Origin, Owner string
	Gates         pool.Gate
	Priority      int
}

func viewOf(p *pool.Pool) map[worker.ID]poolView {
	out := map[worker.ID]poolView{}
	for _, w := range p.Snapshot().All {
		s := w.Spec()
		out[w.ID] = poolView{Origin: w.Origin, Owner: w.Owner(), Gates: w.Gates() & (pool.GateDisabled | pool.GateDead | pool.GateRemoving), Priority: s.PriorityOrDefault()}
	}
	return out
}

// TestReconcileSteps walks one pool through every kind of record change and checks, after each
// pass, the pool's workers and the Own/Drain/Disown calls, including that a pass with nothing
// new changes nothing.
func TestReconcileSteps(t *testing.T) {
	recs := newFakeRecords()
	p := pool.New(pool.Config{})
	owner := &fakeOwner{}
	r := New(Config{NodeID: "n1", Records: recs, Pool: p, Owner: owner, Logger: testkit.Quiet()})
	a := spec(t, 8001, func(s *worker.Spec) { s.APIKey = "sk-a" })
	b := spec(t, 8002)
	stray := spec(t, 8009)
	if _, _, err := p.Upsert(stray, pool.OriginLocal); err != nil {
		t.Fatal(err)
	}
	ida, idb := a.ID(), b.ID()
	drainStart := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	local := func(g pool.Gate, prio int) poolView {
		return poolView{Origin: "local", Owner: "n1", Gates: g, Priority: prio}
	}
	steps := []struct {
		name      string
		change    func()
		wantPool  map[worker.ID]poolView
		wantCalls []call
	}{
		{"create, one owned elsewhere and disabled", func() {
			recs.put(fsm.Record{ID: ida, Spec: a, Owner: "n1", Epoch: 3})
			recs.put(fsm.Record{ID: idb, Spec: b, Owner: "n2", Epoch: 4, Disabled: true})
		}, map[worker.ID]poolView{
			ida: local(0, 50),
			idb: {Origin: "mesh", Owner: "n2", Gates: pool.GateDisabled, Priority: 50},
		}, []call{{Op: "own", ID: ida, Epoch: 3, Key: "sk-a"}}},
		{"nothing new", func() {}, map[worker.ID]poolView{
			ida: local(0, 50),
			idb: {Origin: "mesh", Owner: "n2", Gates: pool.GateDisabled, Priority: 50},
		}, nil},
		{"disable keeps probing", func() {
			recs.update(ida, func(r *fsm.Record) { r.Disabled, r.DisabledReason = true, "maint" })
		}, map[worker.ID]poolView{
			ida: local(pool.GateDisabled, 50),
			idb: {Origin: "mesh", Owner: "n2", Gates: pool.GateDisabled, Priority: 50},
		}, nil},
		{"quarantine tells the owner", func() {
			recs.update(ida, func(r *fsm.Record) { r.IsDead = true })
		}, map[worker.ID]poolView{
			ida: local(pool.GateDisabled|pool.GateDead, 50),
			idb: {Origin: "mesh", Owner: "n2", Gates: pool.GateDisabled, Priority: 50},
		}, []call{{Op: "own", ID: ida, Epoch: 3, Dead: true, Key: "sk-a"}}},
		{"spec change updates in place", func() {
			recs.update(ida, func(r *fsm.Record) { r.Spec.Priority, r.IsDead, r.Disabled = ptr(7), false, false })
		}, map[worker.ID]poolView{
			ida: local(0, 7),
			idb: {Origin: "mesh", Owner: "n2", Gates: pool.GateDisabled, Priority: 50},
		}, []call{{Op: "own", ID: ida, Epoch: 3, Key: "sk-a"}}},
		{"drain closes the gate and tells the owner", func() {
			recs.update(ida, func(r *fsm.Record) { r.Draining, r.DrainStartedAt, r.DrainSettle = true, drainStart, 5*time.Second })
		}, map[worker.ID]poolView{
			ida: local(pool.GateRemoving, 7),
			idb: {Origin: "mesh", Owner: "n2", Gates: pool.GateDisabled, Priority: 50},
		}, []call{{Op: "drain", ID: ida, Epoch: 3, Key: "sk-a", Since: drainStart, Settle: 5 * time.Second}}},
		{"a flag change while draining keeps the drain", func() {
			recs.update(ida, func(r *fsm.Record) { r.Disabled = true })
		}, map[worker.ID]poolView{
			ida: local(pool.GateDisabled|pool.GateRemoving, 7),
			idb: {Origin: "mesh", Owner: "n2", Gates: pool.GateDisabled, Priority: 50},
		}, nil},
		{"a drain owned elsewhere closes the gate", func() {
			recs.update(idb, func(r *fsm.Record) { r.Draining, r.DrainStartedAt, r.DrainSettle = true, drainStart, time.Second })
		}, map[worker.ID]poolView{
			ida: local(pool.GateDisabled|pool.GateRemoving, 7),
			idb: {Origin: "mesh", Owner: "n2", Gates: pool.GateDisabled | pool.GateRemoving, Priority: 50},
		}, nil},
		{"owned elsewhere", func() {
			recs.update(ida, func(r *fsm.Record) { r.Owner, r.Epoch = "n2", 9 })
		}, map[worker.ID]poolView{
			ida: {Origin: "mesh", Owner: "n2", Gates: pool.GateDisabled | pool.GateRemoving, Priority: 7},
			idb: {Origin: "mesh", Owner: "n2", Gates: pool.GateDisabled | pool.GateRemoving, Priority: 50},
		}, []call{{Op: "disown", ID: ida}}},
		{"owned here again (failover) finishes its drain", func() {
			recs.update(idb, func(r *fsm.Record) { r.Owner, r.Epoch = "n1", 11 })
		}, map[worker.ID]poolView{
			ida: {Origin: "mesh", Owner: "n2", Gates: pool.GateDisabled | pool.GateRemoving, Priority: 7},
			idb: local(pool.GateDisabled|pool.GateRemoving, 50),
		}, []call{{Op: "drain", ID: idb, Epoch: 11, Since: drainStart, Settle: time.Second}}},
		{"removed", func() {
			recs.remove(idb)
			recs.remove(ida)
		}, map[worker.ID]poolView{}, []call{{Op: "disown", ID: idb}}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.change()
			before := p.Snapshot().Version
			r.Reconcile()
			if diff := cmp.Diff(st.wantPool, viewOf(p)); diff != "" {
				t.Errorf("pool (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(st.wantCalls, owner.take()); diff != "" {
				t.Errorf("owner calls (-want +got):\n%s", diff)
			}
			// A second pass over the same records is a no-op.
			mid := p.Snapshot().Version
			r.Reconcile()
			if p.Snapshot().Version != mid || len(owner.take()) != 0 {
				t.Error("a second pass over the same records changed something")
			}
			if st.name == "nothing new" && mid != before {
				t.Error("a pass without record changes swapped the pool snapshot")
			}
		})
	}
}

// TestReconcileWithoutOwner: without health checks the pool still follows the records.
func TestReconcileWithoutOwner(t *testing.T) {
	recs := newFakeRecords()
	p := pool.New(pool.Config{})
	r := New(Config{NodeID: "n1", Records: recs, Pool: p, Logger: testkit.Quiet()})
	a := spec(t, 8001)
	recs.put(fsm.Record{ID: a.ID(), Spec: a, Owner: "n1", Epoch: 1, IsDead: true})
	r.Reconcile()
	if w := p.Get(a.ID()); w == nil || w.Gates() != pool.GateDead || len(p.Snapshot().Routable) != 0 {
		t.Fatalf("pool %+v", viewOf(p))
	}
	recs.update(a.ID(), func(r *fsm.Record) { r.IsDead = false })
	r.Reconcile()
	if len(p.Snapshot().Routable) != 1 {
		t.Fatal("clearing is_dead did not make the worker routable")
	}
}

// TestReconcileFollowsRaft runs the reconciler against a real (in-memory) raft node: records
// written through the Writer reach the pool without an explicit pass, the API key reaches Own
// but no log line, and Stop ends the loop.
func TestReconcileFollowsRaft(t *testing.T) {
	n := startNode(t, "n1", true)
	p := pool.New(pool.Config{})
	owner := &fakeOwner{}
	var logs logBuffer
	r := New(Config{NodeID: "n1", Records: n, Pool: p, Owner: owner, Logger: logs.Logger(slog.LevelDebug)})
	w := &Writer{Node: n, NodeID: "n1", Logger: logs.Logger(slog.LevelDebug)}
	ctx := context.Background()
	a := spec(t, 8001, func(s *worker.Spec) { s.APIKey = "sk-never-logged" })
	if _, err := w.Apply(ctx, fsm.Register{Spec: a, Owner: "n1", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r.Start()
	defer r.Stop()
	if p.Get(a.ID()) == nil {
		t.Fatal("Start did not apply the records already there")
	}
	if _, err := w.Apply(ctx, fsm.SetFlags{ID: a.ID(), Flags: fsm.FlagChange{Disabled: ptr(true), By: "test"}}); err != nil {
		t.Fatal(err)
	}
	testkit.For(t, "the disable to reach the pool", func() bool { return p.Get(a.ID()).Gates()&pool.GateDisabled != 0 })
	if _, err := w.Apply(ctx, fsm.Remove{ID: a.ID()}); err != nil {
		t.Fatal(err)
	}
	testkit.For(t, "the removal to reach the pool", func() bool { return p.Get(a.ID()) == nil })
	// The pass that removed the worker may still be logging and calling Disown: Stop waits for
	// the loop to end, so everything below reads a finished pass.
	r.Stop()
	calls := owner.take()
	if len(calls) != 2 || calls[0].Op != "own" || calls[0].Key != "sk-never-logged" || calls[1].Op != "disown" {
		t.Errorf("owner calls %+v", calls)
	}
	if strings.Contains(logs.String(), "sk-never-logged") {
		t.Error("the worker's API key reached the log")
	}
	for _, line := range []string{"applied the worker records raft has restored", "worker added", "worker flags changed", "worker removed"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("no %q line in the log:\n%s", line, logs.String())
		}
	}
	r.Stop() // idempotent
}

// TestReconcileHoldsHistoryUntilCaughtUp: Start applies the state there is (a snapshot), the
// states a replaying log passes through are held back (the worker registered but not yet
// disabled must never be routable), and the current state is applied once caught up.
func TestReconcileHoldsHistoryUntilCaughtUp(t *testing.T) {
	recs := newFakeRecords()
	var p *pool.Pool
	var sawRoutable atomic.Bool
	p = pool.New(pool.Config{OnChange: func() {
		if len(p.Snapshot().Routable) > 0 {
			sawRoutable.Store(true)
		}
	}})
	owner := &fakeOwner{}
	caughtUp := make(chan struct{})
	var logs logBuffer
	r := New(Config{NodeID: "n1", Records: recs, Pool: p, Owner: owner, CaughtUp: caughtUp, Logger: logs.Logger(slog.LevelDebug)})
	snap := spec(t, 8000)
	recs.put(fsm.Record{ID: snap.ID(), Spec: snap, Owner: "n1", Epoch: 1, Disabled: true})
	r.Start()
	defer r.Stop()
	if w := p.Get(snap.ID()); w == nil || w.Gates() != pool.GateDisabled {
		t.Fatal("Start did not apply the restored state")
	}
	// The log replays: a register, then the disable and quarantine that followed it.
	a := spec(t, 8001)
	recs.put(fsm.Record{ID: a.ID(), Spec: a, Owner: "n1", Epoch: 2})
	recs.signal()
	testkit.For(t, "the signal to be held", func() bool { return len(recs.watch) == 0 })
	recs.update(a.ID(), func(r *fsm.Record) { r.Disabled, r.IsDead = true, true })
	recs.signal()
	close(caughtUp)
	testkit.For(t, "the current state in the pool", func() bool { w := p.Get(a.ID()); return w != nil && w.Gates() == pool.GateDisabled|pool.GateDead })
	if sawRoutable.Load() {
		t.Error("a replayed, since disabled worker was routable")
	}
	for _, c := range owner.take() {
		if c.ID == a.ID() && !c.Dead {
			t.Errorf("the owner was told to probe a quarantined worker: %+v", c)
		}
	}
	testkit.For(t, "the caught-up line", func() bool { return strings.Contains(logs.String(), "raft state is current") })
}

// TestReconcilePassIsOneSnapshot: a pass over many records, owned here and elsewhere, reaches
// the data plane as one snapshot swap (not one per record), with every worker's owner set
// although the snapshot did not show the workers while the pass ran.
func TestReconcilePassIsOneSnapshot(t *testing.T) {
	recs := newFakeRecords()
	var swaps atomic.Int32
	p := pool.New(pool.Config{OnChange: func() { swaps.Add(1) }})
	r := New(Config{NodeID: "n1", Records: recs, Pool: p, Owner: &fakeOwner{}, Logger: testkit.Quiet()})
	for i := range 200 {
		s := spec(t, 10000+i)
		owner := "n2"
		if i%2 == 0 {
			owner = "n1"
		}
		recs.put(fsm.Record{ID: s.ID(), Spec: s, Owner: owner, Epoch: 1})
	}
	r.Reconcile()
	if got := swaps.Load(); got != 1 {
		t.Fatalf("the pass swapped the snapshot %d times, want 1", got)
	}
	snap := p.Snapshot()
	if len(snap.All) != 200 || len(snap.Routable) != 200 {
		t.Fatalf("snapshot has %d workers, %d routable; want 200, 200", len(snap.All), len(snap.Routable))
	}
	for _, w := range snap.All {
		if want := map[bool]string{true: "n1", false: "n2"}[w.Origin == pool.OriginLocal]; w.Owner() != want {
			t.Fatalf("worker %s origin %s has owner %q", w.ID, w.Origin, w.Owner())
		}
	}
	r.Reconcile() // nothing changed: no swap
	if got := swaps.Load(); got != 1 {
		t.Fatalf("an idle pass swapped the snapshot (%d swaps)", got)
	}
}
