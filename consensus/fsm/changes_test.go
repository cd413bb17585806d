package fsm

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// changedIDs returns the ids of ch, present and removed, sorted.
func changedIDs(ch Changes) (present, removed []worker.ID) {
	for _, r := range ch.Workers {
		present = append(present, r.ID)
	}
	slices.Sort(present)
	removed = slices.Sorted(slices.Values(ch.Removed))
	return present, removed
}

// TestChangedSince applies a sequence of commands and asks, after each, what changed since
// every earlier version: each changed id once, as its record now or as removed, and nothing for
// a command that changed nothing.
func TestChangedSince(t *testing.T) {
	a, b := spec(t, "http://10.0.0.1:8000", 0), spec(t, "http://10.0.0.2:8000", 0)
	ida, idb := a.ID(), b.ID()
	f := New(testkit.Quiet())
	steps := []struct {
		name    string
		cmd     Command
		touches []worker.ID // nil: changes nothing
	}{
		{"register a", Register{Spec: a, Owner: "n1", At: t0}, []worker.ID{ida}},
		{"register b", Register{Spec: b, Owner: "n1", At: t0}, []worker.ID{idb}},
		{"register a again (unchanged)", Register{Spec: a, Owner: "n1", At: t1}, nil},
		{"disable a", SetFlags{ID: ida, Flags: FlagChange{Disabled: ptr(true), By: "ops", At: t0}}, []worker.ID{ida}},
		{"disable a again (unchanged)", SetFlags{ID: ida, Flags: FlagChange{Disabled: ptr(true), By: "ops", At: t1}}, nil},
		{"replace b's spec", ReplaceSpec{ID: idb, Spec: spec(t, "http://10.0.0.2:8000", 9)}, []worker.ID{idb}},
		{"transfer a", Transfer{ID: ida, To: "n2"}, []worker.ID{ida}},
		{"transfer a to its owner (unchanged)", Transfer{ID: ida, To: "n2"}, nil},
		{"remove b", Remove{ID: idb}, []worker.ID{idb}},
		{"remove b again (rejected)", Remove{ID: idb}, nil},
		{"fenced remove of a (rejected)", Remove{ID: ida, Fence: &Fence{Owner: "n1", Epoch: 1}}, nil},
	}
	// touched[v] is the id version v changed.
	touched := []worker.ID{""}
	for i, st := range steps {
		before := f.Version()
		applyAt(t, f, uint64(i+1), st.cmd)
		if got, want := f.Version()-before, uint64(len(st.touches)); got != want {
			t.Fatalf("%s: version grew by %d, want %d", st.name, got, want)
		}
		touched = append(touched, st.touches...)
		for v := range f.Version() + 1 {
			ch, ok := f.ChangedSince(v)
			if !ok || ch.Now != f.Version() {
				t.Fatalf("%s: ChangedSince(%d) = now %d, ok %v; want now %d, ok", st.name, v, ch.Now, ok, f.Version())
			}
			var wantPresent, wantRemoved []worker.ID
			for _, id := range touched[v+1:] {
				if _, exists := f.Worker(id); exists {
					wantPresent = append(wantPresent, id)
				} else {
					wantRemoved = append(wantRemoved, id)
				}
			}
			wantPresent, wantRemoved = slices.Compact(slices.Sorted(slices.Values(wantPresent))), slices.Compact(slices.Sorted(slices.Values(wantRemoved)))
			present, removed := changedIDs(ch)
			if diff := cmp.Diff(wantPresent, present); diff != "" {
				t.Errorf("%s: ChangedSince(%d) records (-want +got):\n%s", st.name, v, diff)
			}
			if diff := cmp.Diff(wantRemoved, removed); diff != "" {
				t.Errorf("%s: ChangedSince(%d) removed (-want +got):\n%s", st.name, v, diff)
			}
			for _, r := range ch.Workers {
				if cur, _ := f.Worker(r.ID); cur.Revision != r.Revision {
					t.Errorf("%s: ChangedSince(%d) gave %s at revision %d, the record is at %d", st.name, v, r.ID, r.Revision, cur.Revision)
				}
			}
		}
	}
	if _, ok := f.ChangedSince(f.Version() + 1); ok {
		t.Error("ChangedSince of a version not reached yet is ok")
	}
}

// TestChangedSinceNeverDropsLiveRecords: however many changes came after v, the records they
// changed are named (a burst of writes between two saves or two reconcile passes costs what it
// changed, not a read of every record); only removals beyond changeLogTombstones are dropped,
// and a reader from before the oldest dropped one must then read every record.
func TestChangedSinceNeverDropsLiveRecords(t *testing.T) {
	f := New(testkit.Quiet())
	idx := uint64(0)
	apply := func(c Command) { idx++; applyAt(t, f, idx, c) }
	s := spec(t, "http://127.0.0.1:8001", 0)
	apply(Register{Spec: s, Owner: "n1"})
	for i := range 3 * changeLogTombstones {
		apply(SetFlags{ID: s.ID(), Flags: FlagChange{Disabled: ptr(i%2 == 0), By: "t"}})
	}
	if ch, ok := f.ChangedSince(0); !ok || len(ch.Workers) != 1 || ch.Workers[0].ID != s.ID() || len(ch.Removed) != 0 {
		t.Fatalf("ChangedSince(0) after %d changes of one record = %+v, %v; want the one record", 3*changeLogTombstones+1, ch, ok)
	}

	const n = changeLogTombstones + 1
	ids := make([]worker.ID, n)
	for i := range n {
		s := spec(t, fmt.Sprintf("http://10.1.%d.%d:8000", i>>8&255, i&255), 0)
		ids[i] = s.ID()
		apply(Register{Spec: s, Owner: "n1"})
	}
	registered := f.Version()
	for _, id := range ids {
		apply(Remove{ID: id})
	}
	// The first removal (version registered+1) was dropped; every later one is named.
	for _, v := range []uint64{0, registered} {
		if _, ok := f.ChangedSince(v); ok {
			t.Errorf("ChangedSince(%d) is ok with %d removals since, more than the log keeps", v, n)
		}
	}
	ch, ok := f.ChangedSince(registered + 1)
	if !ok || len(ch.Removed) != n-1 || len(ch.Workers) != 0 {
		t.Fatalf("ChangedSince(%d) = %d removed, %d records, %v; want %d removed", registered+1, len(ch.Removed), len(ch.Workers), ok, n-1)
	}
	// A removed id registered again is a record again.
	apply(Register{Spec: spec(t, "http://10.1.0.5:8000", 0), Owner: "n1"})
	ch, ok = f.ChangedSince(registered + 1)
	if !ok || len(ch.Removed) != n-2 || len(ch.Workers) != 1 || ch.Workers[0].ID != ids[5] {
		t.Errorf("after registering %s again: %d removed, records %v, %v; want %d removed and it", ids[5], len(ch.Removed), ch.Workers, ok, n-2)
	}
}

// TestChangedSinceAfterReset: a restored snapshot and the cluster init are changes the FSM does
// not name by record, so a reader from before them must read every record; one from after
// them is answered.
func TestChangedSinceAfterReset(t *testing.T) {
	a, b := spec(t, "http://10.0.0.1:8000", 0), spec(t, "http://10.0.0.2:8000", 0)
	src := New(testkit.Quiet())
	applyAt(t, src, 1, Register{Spec: a, Owner: "n1"})
	var buf bytes.Buffer
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.(*snapshot).write(&buf); err != nil {
		t.Fatal(err)
	}

	f := New(testkit.Quiet())
	applyAt(t, f, 1, InitCluster{ClusterID: "c1"})
	if _, ok := f.ChangedSince(0); ok {
		t.Error("ChangedSince from before the cluster init is ok")
	}
	if ch, ok := f.ChangedSince(f.Version()); !ok || len(ch.Workers)+len(ch.Removed) != 0 {
		t.Errorf("ChangedSince(now) = %+v, %v; want nothing, ok", ch, ok)
	}
	applyAt(t, f, 2, Register{Spec: b, Owner: "n1"})
	beforeRestore := f.Version()
	if err := f.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	for v := range f.Version() {
		if _, ok := f.ChangedSince(v); ok {
			t.Errorf("ChangedSince(%d) is ok across the restore (restored at %d)", v, beforeRestore+1)
		}
	}
	restored := f.Version()
	applyAt(t, f, 2, Transfer{ID: a.ID(), To: "n2"})
	ch, ok := f.ChangedSince(restored)
	if !ok || len(ch.Workers) != 1 || ch.Workers[0].Owner != "n2" || len(ch.Removed) != 0 {
		t.Errorf("ChangedSince(%d) = %+v, %v; want a, owned by n2", restored, ch, ok)
	}
}

// TestChangedSinceConcurrent: a reader that follows the FSM through ChangedSince alone, while
// commands apply, ends with every record as the FSM has it: the version and the changes it
// reads always agree.
func TestChangedSinceConcurrent(t *testing.T) {
	const workers, commands = 20, 2000 // fewer removals than the log keeps: the reader never falls off
	specs := make([]worker.Spec, workers)
	for i := range specs {
		specs[i] = spec(t, fmt.Sprintf("http://10.0.0.%d:8000", i+1), 0)
	}
	f := New(testkit.Quiet())
	ch, stop := f.Watch()
	defer stop()
	done := make(chan struct{})
	mirror := map[worker.ID]uint64{} // id -> revision
	var v uint64
	follow := func() {
		c, ok := f.ChangedSince(v)
		if !ok {
			t.Errorf("ChangedSince(%d) is not ok", v)
			return
		}
		for _, r := range c.Workers {
			mirror[r.ID] = r.Revision
		}
		for _, id := range c.Removed {
			delete(mirror, id)
		}
		v = c.Now
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ch:
				follow()
			case <-done:
				follow()
				return
			}
		}
	})
	for i := range commands {
		s := specs[i%workers]
		var cmd Command
		switch i / workers % 3 {
		case 0:
			cmd = Register{Spec: s, Owner: "n1"}
		case 1:
			cmd = SetFlags{ID: s.ID(), Flags: FlagChange{IsDead: ptr(i%2 == 0)}}
		default:
			cmd = Remove{ID: s.ID()}
		}
		applyAt(t, f, uint64(i+1), cmd)
	}
	close(done)
	wg.Wait()
	want := map[worker.ID]uint64{}
	for _, r := range f.Workers() {
		want[r.ID] = r.Revision
	}
	if diff := cmp.Diff(want, mirror); diff != "" {
		t.Errorf("the reader's records (-fsm +reader):\n%s", diff)
	}
	if v != f.Version() {
		t.Errorf("the reader is at version %d, the FSM at %d", v, f.Version())
	}
}

// TestChangeLogBatches: a change that touches several records (a batch reassignment) logs each
// id once under one version, a later change of an id moves it to that version, and a reset
// forgets everything before it.
func TestChangeLogBatches(t *testing.T) {
	var l changeLog
	workers := map[worker.ID]*Record{"a": {}, "b": {}}
	batch := make([]worker.ID, 2*changeLogTombstones)
	for i := range batch {
		batch[i] = worker.ID(fmt.Sprint("w", i))
		workers[batch[i]] = &Record{}
	}
	sorted := func(ids []worker.ID) []worker.ID { return slices.Sorted(slices.Values(ids)) }
	l.add(1, []worker.ID{"a", "b", "a"}, workers) // a version may touch an id twice
	if ids, ok := l.since(0, 1); !ok || !slices.Equal(sorted(ids), []worker.ID{"a", "b"}) {
		t.Fatalf("since(0) = %v, %v; want [a b]", ids, ok)
	}
	l.add(2, batch, workers)
	if ids, ok := l.since(0, 2); !ok || len(ids) != len(batch)+2 {
		t.Errorf("since(0) = %d ids, %v; want %d, ok", len(ids), ok, len(batch)+2)
	}
	ids, ok := l.since(1, 2)
	if !ok || len(ids) != len(batch) {
		t.Fatalf("since(1) = %d ids, %v; want %d, ok", len(ids), ok, len(batch))
	}
	delete(workers, "a")
	l.add(3, []worker.ID{"a"}, workers)
	if ids, ok := l.since(2, 3); !ok || !slices.Equal(ids, []worker.ID{"a"}) {
		t.Errorf("since(2) = %v, %v; want [a]", ids, ok)
	}
	if ids, ok := l.since(1, 3); !ok || len(ids) != len(batch)+1 {
		t.Errorf("since(1) = %d ids, %v; want %d, ok", len(ids), ok, len(batch)+1)
	}
	if ids, ok := l.since(3, 3); !ok || len(ids) != 0 {
		t.Errorf("since(now) = %v, %v; want nothing, ok", ids, ok)
	}
	l.add(4, nil, nil)
	if _, ok := l.since(3, 4); ok {
		t.Error("since(3) is ok across a reset at 4")
	}
	if ids, ok := l.since(4, 4); !ok || len(ids) != 0 {
		t.Errorf("since(4) = %v, %v; want nothing, ok", ids, ok)
	}
	if len(l.byID) != 0 {
		t.Errorf("the log keeps %d entries after a reset", len(l.byID))
	}
}
