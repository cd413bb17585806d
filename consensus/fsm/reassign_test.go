package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// TestReassign runs Reassign entries at index 100 against records registered at indexes 1, 2,
// ... (owner n1, epoch = registration index) and checks the result and every record.
func TestReassign(t *testing.T) {
	specs := []worker.Spec{
		spec(t, "http://127.0.0.1:8001", 0),
		spec(t, "http://127.0.0.1:8002", 0),
		spec(t, "http://127.0.0.1:8003", 0),
	}
	a, b, c := specs[0].ID(), specs[1].ID(), specs[2].ID()
	missing := worker.ID("w-000000000000")
	from := func(epoch uint64) Fence { return Fence{Owner: "n1", Epoch: epoch} }

	tests := []struct {
		name      string
		cmd       Reassign
		want      Outcome
		wantErr   error
		wantRes   *ReassignResult
		wantOwner map[worker.ID]string // every record's owner afterwards
		wantEpoch map[worker.ID]uint64
	}{
		{"all move", Reassign{Items: []ReassignItem{
			{ID: a, From: from(1), To: "n2"}, {ID: b, From: from(2), To: "n3"}}},
			Updated, nil, &ReassignResult{Moved: []worker.ID{a, b}},
			map[worker.ID]string{a: "n2", b: "n3", c: "n1"},
			map[worker.ID]uint64{a: 100, b: 100, c: 3}},
		{"stale epoch is skipped, the rest moves", Reassign{Items: []ReassignItem{
			{ID: a, From: from(7), To: "n2"}, {ID: b, From: from(2), To: "n2"}}},
			Updated, nil, &ReassignResult{Moved: []worker.ID{b}, Skipped: []ReassignSkip{
				{ID: a, Reason: `fenced: owner "n1" at epoch 1, not "n1" at epoch 7`}}},
			map[worker.ID]string{a: "n1", b: "n2", c: "n1"},
			map[worker.ID]uint64{a: 1, b: 100, c: 3}},
		{"other owner is skipped", Reassign{Items: []ReassignItem{
			{ID: c, From: Fence{Owner: "n9", Epoch: 3}, To: "n2"}}},
			Unchanged, nil, &ReassignResult{Skipped: []ReassignSkip{
				{ID: c, Reason: `fenced: owner "n1" at epoch 3, not "n9" at epoch 3`}}},
			map[worker.ID]string{a: "n1", b: "n1", c: "n1"},
			map[worker.ID]uint64{a: 1, b: 2, c: 3}},
		{"missing record is skipped", Reassign{Items: []ReassignItem{
			{ID: missing, From: from(1), To: "n2"}, {ID: c, From: from(3), To: "n2"}}},
			Updated, nil, &ReassignResult{Moved: []worker.ID{c},
				Skipped: []ReassignSkip{{ID: missing, Reason: "not found"}}},
			map[worker.ID]string{a: "n1", b: "n1", c: "n2"},
			map[worker.ID]uint64{a: 1, b: 2, c: 100}},
		{"to the current owner is skipped", Reassign{Items: []ReassignItem{
			{ID: a, From: from(1), To: "n1"}}},
			Unchanged, nil, &ReassignResult{Skipped: []ReassignSkip{
				{ID: a, Reason: "already owned by n1"}}},
			map[worker.ID]string{a: "n1", b: "n1", c: "n1"},
			map[worker.ID]uint64{a: 1, b: 2, c: 3}},
		{"the same id twice moves once", Reassign{Items: []ReassignItem{
			{ID: a, From: from(1), To: "n2"}, {ID: a, From: from(1), To: "n3"}}},
			Updated, nil, &ReassignResult{Moved: []worker.ID{a}, Skipped: []ReassignSkip{
				{ID: a, Reason: `fenced: owner "n2" at epoch 100, not "n1" at epoch 1`}}},
			map[worker.ID]string{a: "n2", b: "n1", c: "n1"},
			map[worker.ID]uint64{a: 100, b: 2, c: 3}},
		{"empty batch", Reassign{}, Unchanged, nil, &ReassignResult{},
			map[worker.ID]string{a: "n1", b: "n1", c: "n1"},
			map[worker.ID]uint64{a: 1, b: 2, c: 3}},
		{"empty target rejects the whole entry", Reassign{Items: []ReassignItem{
			{ID: a, From: from(1), To: "n2"}, {ID: b, From: from(2)}}},
			Rejected, ErrInvalid, nil,
			map[worker.ID]string{a: "n1", b: "n1", c: "n1"},
			map[worker.ID]uint64{a: 1, b: 2, c: 3}},
		{"empty id rejects", Reassign{Items: []ReassignItem{{From: from(1), To: "n2"}}},
			Rejected, ErrInvalid, nil,
			map[worker.ID]string{a: "n1", b: "n1", c: "n1"},
			map[worker.ID]uint64{a: 1, b: 2, c: 3}},
		{"empty expected owner rejects", Reassign{Items: []ReassignItem{{ID: a, To: "n2"}}},
			Rejected, ErrInvalid, nil,
			map[worker.ID]string{a: "n1", b: "n1", c: "n1"},
			map[worker.ID]uint64{a: 1, b: 2, c: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(testkit.Quiet())
			for i, s := range specs {
				applyAt(t, f, uint64(i+1), Register{Spec: s, Owner: "n1", At: t0})
			}
			v := f.Version()
			res := applyAt(t, f, 100, tt.cmd)
			if res.Outcome != tt.want || !errors.Is(res.Err, tt.wantErr) || (tt.wantErr == nil) != (res.Err == nil) {
				t.Fatalf("got %v, %v; want %v, %v", res.Outcome, res.Err, tt.want, tt.wantErr)
			}
			if d := cmp.Diff(tt.wantRes, res.Reassign); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
			for _, r := range f.Workers() {
				if r.Owner != tt.wantOwner[r.ID] || r.Epoch != tt.wantEpoch[r.ID] {
					t.Errorf("%s: owner %s epoch %d; want %s epoch %d",
						r.ID, r.Owner, r.Epoch, tt.wantOwner[r.ID], tt.wantEpoch[r.ID])
				}
				if moved := r.Epoch == 100; moved != (r.Revision == 100) {
					t.Errorf("%s: epoch %d but revision %d", r.ID, r.Epoch, r.Revision)
				}
			}
			// The change log names exactly the moved ids, once each.
			ch, ok := f.ChangedSince(v)
			if !ok || len(ch.Removed) != 0 {
				t.Fatalf("ChangedSince: ok %v, %+v", ok, ch)
			}
			var changed []worker.ID
			for _, r := range ch.Workers {
				changed = append(changed, r.ID)
			}
			var moved []worker.ID
			if tt.wantRes != nil {
				moved = tt.wantRes.Moved
			}
			if d := cmp.Diff(moved, changed, cmpopts.SortSlices(func(x, y worker.ID) bool { return x < y }), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("changed ids (-moved +changed):\n%s", d)
			}
			if bumped := f.Version() != v; bumped != res.Outcome.Changed() {
				t.Errorf("version bumped = %v for outcome %v", bumped, res.Outcome)
			}
		})
	}
}

// TestReassignDeterministic applies the same entries to two FSMs and to a third restored from
// a snapshot of the first taken mid-way: all end in the same state and return the same results.
func TestReassignDeterministic(t *testing.T) {
	build := func() (*FSM, []Command) {
		var cmds []Command
		for i := range 50 {
			cmds = append(cmds, Register{Spec: spec(t, fmt.Sprintf("http://127.0.0.1:%d", 9000+i), 0),
				Owner: fmt.Sprintf("n%d", i%3), At: t0})
		}
		return New(testkit.Quiet()), cmds
	}
	f1, cmds := build()
	f2, _ := build()
	for i, c := range cmds {
		applyAt(t, f1, uint64(i+1), c)
		applyAt(t, f2, uint64(i+1), c)
	}
	// Move every worker of n0 to n1, with a stale fence on every fifth item.
	var items []ReassignItem
	for _, r := range f1.Workers() {
		if r.Owner != "n0" {
			continue
		}
		e := r.Epoch
		if len(items)%5 == 0 {
			e++
		}
		items = append(items, ReassignItem{ID: r.ID, From: Fence{Owner: "n0", Epoch: e}, To: "n1"})
	}
	snap := persist(t, f1)
	r1 := applyAt(t, f1, 60, Reassign{Items: items})
	r2 := applyAt(t, f2, 60, Reassign{Items: items})
	if d := cmp.Diff(r1, r2, cmp.Comparer(func(a, b error) bool { return fmt.Sprint(a) == fmt.Sprint(b) })); d != "" {
		t.Fatalf("results differ:\n%s", d)
	}
	if len(r1.Reassign.Moved) == 0 || len(r1.Reassign.Skipped) == 0 {
		t.Fatalf("want moves and skips, got %+v", r1.Reassign)
	}
	f3 := New(testkit.Quiet())
	if err := f3.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	applyAt(t, f3, 60, Reassign{Items: items})
	if d := cmp.Diff(viewOf(f1), viewOf(f2)); d != "" {
		t.Errorf("f1 and f2 differ:\n%s", d)
	}
	if d := cmp.Diff(viewOf(f1), viewOf(f3)); d != "" {
		t.Errorf("f1 and the restored f3 differ:\n%s", d)
	}
	// And the state after the move survives a snapshot round trip.
	f4 := New(testkit.Quiet())
	if err := f4.Restore(io.NopCloser(bytes.NewReader(persist(t, f1)))); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(viewOf(f1), viewOf(f4)); d != "" {
		t.Errorf("snapshot round trip after a reassign:\n%s", d)
	}
}
