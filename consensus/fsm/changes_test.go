package fsm

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

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
	f := New(quiet())
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

// TestChangedSinceOverflow: once more record changes than the log holds came after v, the FSM
// cannot name them and says so; a recent version is still answered.
func TestChangedSinceOverflow(t *testing.T) {
	f := New(quiet())
	s := spec(t, "http://127.0.0.1:8001", 0)
	applyAt(t, f, 1, Register{Spec: s, Owner: "n1"})
	start := f.Version()
	for i := range changeLogSize {
		applyAt(t, f, uint64(i+2), SetFlags{ID: s.ID(), Flags: FlagChange{Disabled: ptr(i%2 == 0), By: "t"}})
	}
	if got := f.Version() - start; got != changeLogSize {
		t.Fatalf("%d versions, want %d", got, changeLogSize)
	}
	// The register (version start) fell off the log; the changes after it are all there.
	for v := range start {
		if _, ok := f.ChangedSince(v); ok {
			t.Errorf("ChangedSince(%d) is ok after %d later changes", v, changeLogSize+1)
		}
	}
	for _, v := range []uint64{start, f.Version() - 1} {
		ch, ok := f.ChangedSince(v)
		if !ok || len(ch.Workers) != 1 || ch.Workers[0].ID != s.ID() {
			t.Errorf("ChangedSince(%d) = %+v, %v; want the one record", v, ch, ok)
		}
	}
}

// TestChangedSinceAfterReset: a restored snapshot and the cluster init are changes the FSM does
// not name by record, so a reader from before them must read every record; one from after
// them is answered.
func TestChangedSinceAfterReset(t *testing.T) {
	a, b := spec(t, "http://10.0.0.1:8000", 0), spec(t, "http://10.0.0.2:8000", 0)
	src := New(quiet())
	applyAt(t, src, 1, Register{Spec: a, Owner: "n1"})
	var buf bytes.Buffer
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.(*snapshot).write(&buf); err != nil {
		t.Fatal(err)
	}

	f := New(quiet())
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
	const workers, commands = 20, 2000 // fewer changes than the log holds: the reader never falls off
	specs := make([]worker.Spec, workers)
	for i := range specs {
		specs[i] = spec(t, fmt.Sprintf("http://10.0.0.%d:8000", i+1), 0)
	}
	f := New(quiet())
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

// TestChangeLogBatches: a change that touches several records (the batch reassignment to come)
// logs each id under one version, and a version partly overwritten counts as lost.
func TestChangeLogBatches(t *testing.T) {
	var l changeLog
	batch := make([]worker.ID, changeLogSize-1)
	for i := range batch {
		batch[i] = worker.ID(fmt.Sprint("w", i))
	}
	l.add(1, []worker.ID{"a", "b", "a"}) // a version may touch an id twice
	if ids, ok := l.since(0, 1); !ok || !slices.Equal(ids, []worker.ID{"a", "b"}) {
		t.Fatalf("since(0) = %v, %v; want [a b]", ids, ok)
	}
	l.add(2, batch) // overwrites the first "a" and "b" of version 1, not the last "a"
	if _, ok := l.since(0, 2); ok {
		t.Error("since(0) is ok with version 1 partly overwritten")
	}
	ids, ok := l.since(1, 2)
	if !ok || len(ids) != len(batch) {
		t.Fatalf("since(1) = %d ids, %v; want %d, ok", len(ids), ok, len(batch))
	}
	if ids, ok := l.since(2, 2); !ok || len(ids) != 0 {
		t.Errorf("since(now) = %v, %v; want nothing, ok", ids, ok)
	}
	l.add(3, nil)
	if _, ok := l.since(2, 3); ok {
		t.Error("since(2) is ok across a reset at 3")
	}
	if ids, ok := l.since(3, 3); !ok || len(ids) != 0 {
		t.Errorf("since(3) = %v, %v; want nothing, ok", ids, ok)
	}
}
