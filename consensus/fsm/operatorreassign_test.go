package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// TestOperatorReassign runs OperatorReassign entries at index 100 against records registered at
// indexes 1, 2, 3 (owner n1) with n3 already marked draining at index 4, and checks the result, the
// owners and the marks.
func TestOperatorReassign(t *testing.T) {
	specs := []worker.Spec{spec(t, "http://127.0.0.1:8001", 0), spec(t, "http://127.0.0.1:8002", 0), spec(t, "http://127.0.0.1:8003", 0)}
	a, b, c := specs[0].ID(), specs[1].ID(), specs[2].ID()
	from := func(epoch uint64) Fence { return Fence{Owner: "n1", Epoch: epoch} }
	tests := []struct {
		name      string
		cmd       OperatorReassign
		want      Outcome
		wantErr   error
		wantRes   *ReassignResult
		wantOwner map[worker.ID]string
		wantMarks []string
	}{
		{"drain n1 and move its workers in one entry", OperatorReassign{Reason: "drain", Drain: []string{"n1"}, At: t1,
			Items: []ReassignItem{{ID: a, From: from(1), To: "n2"}, {ID: b, From: from(2), To: "n2"}, {ID: c, From: from(3), To: "n4"}}},
			Updated, nil, &ReassignResult{Moved: []worker.ID{a, b, c}},
			map[worker.ID]string{a: "n2", b: "n2", c: "n4"}, []string{"n1", "n3"}},
		{"a draining target is skipped", OperatorReassign{Reason: "transfer", Items: []ReassignItem{{ID: a, From: from(1), To: "n3"}}},
			Unchanged, nil, &ReassignResult{Skipped: []ReassignSkip{{ID: a, Reason: "n3 is draining"}}},
			map[worker.ID]string{a: "n1", b: "n1", c: "n1"}, []string{"n3"}},
		{"a target drained by the same entry is skipped", OperatorReassign{Reason: "drain", Drain: []string{"n2"},
			Items: []ReassignItem{{ID: a, From: from(1), To: "n2"}}},
			Updated, nil, &ReassignResult{Skipped: []ReassignSkip{{ID: a, Reason: "n2 is draining"}}},
			map[worker.ID]string{a: "n1", b: "n1", c: "n1"}, []string{"n2", "n3"}},
		{"a stale fence is skipped", OperatorReassign{Reason: "rebalance", Items: []ReassignItem{
			{ID: a, From: Fence{Owner: "n2", Epoch: 1}, To: "n4"}, {ID: b, From: from(2), To: "n4"}}},
			Updated, nil, &ReassignResult{Moved: []worker.ID{b}, Skipped: []ReassignSkip{
				{ID: a, Reason: `fenced: owner "n1" at epoch 1, not "n2" at epoch 1`}}},
			map[worker.ID]string{a: "n1", b: "n4", c: "n1"}, []string{"n3"}},
		{"undrain clears a mark", OperatorReassign{Reason: "drain", Undrain: []string{"n3", "n9"}},
			Updated, nil, &ReassignResult{}, map[worker.ID]string{a: "n1", b: "n1", c: "n1"}, nil},
		{"draining again keeps the mark and changes nothing", OperatorReassign{Reason: "drain", Drain: []string{"n3"}, At: t1},
			Unchanged, nil, &ReassignResult{}, map[worker.ID]string{a: "n1", b: "n1", c: "n1"}, []string{"n3"}},
		{"an empty peer rejects the entry", OperatorReassign{Drain: []string{""}, Items: []ReassignItem{{ID: a, From: from(1), To: "n2"}}},
			Rejected, ErrInvalid, nil, map[worker.ID]string{a: "n1", b: "n1", c: "n1"}, []string{"n3"}},
		{"an empty target rejects the entry", OperatorReassign{Drain: []string{"n1"}, Items: []ReassignItem{{ID: a, From: from(1)}}},
			Rejected, ErrInvalid, nil, map[worker.ID]string{a: "n1", b: "n1", c: "n1"}, []string{"n3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(testkit.Quiet())
			for i, s := range specs {
				applyAt(t, f, uint64(i+1), Register{Spec: s, Owner: "n1"})
			}
			applyAt(t, f, 4, OperatorReassign{Reason: "drain", Drain: []string{"n3"}, At: t0})
			res := applyAt(t, f, 100, tt.cmd)
			if res.Outcome != tt.want || !errors.Is(res.Err, tt.wantErr) || (tt.wantErr == nil) != (res.Err == nil) {
				t.Fatalf("outcome %v err %v; want %v %v", res.Outcome, res.Err, tt.want, tt.wantErr)
			}
			if d := cmp.Diff(tt.wantRes, res.Reassign); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
			for id, owner := range tt.wantOwner {
				r, _ := f.Worker(id)
				if r.Owner != owner || (owner != "n1") != (r.Epoch == 100) {
					t.Errorf("%s: owner %s epoch %d; want %s", id, r.Owner, r.Epoch, owner)
				}
			}
			var marks []string
			for _, d := range f.Draining() {
				marks = append(marks, d.ID)
				if d.ID == "n3" && !d.Since.Equal(t0) {
					t.Errorf("n3 draining since %v, want the first mark's %v", d.Since, t0)
				}
			}
			if d := cmp.Diff(tt.wantMarks, marks); d != "" {
				t.Errorf("marks (-want +got):\n%s", d)
			}
		})
	}
}

// TestDrainMarkNamesAProcess: a mark names the process of its peer it drains by its start time
// (none when the proposer did not know it); draining the peer again keeps the mark's time and
// names the process given, since the drain is asked of the process running now; a clear removes
// it whatever process it names.
func TestDrainMarkNamesAProcess(t *testing.T) {
	first, again := t0.Add(-time.Hour), t0.Add(time.Minute)
	f := New(testkit.Quiet())
	mark := func() DrainingPeer {
		t.Helper()
		for _, d := range f.Draining() {
			if d.ID == "n2" {
				return d
			}
		}
		t.Fatal("n2 is not marked")
		return DrainingPeer{}
	}
	res := applyAt(t, f, 1, OperatorReassign{Reason: "drain", Drain: []string{"n2", "n3"}, At: t0, Started: map[string]time.Time{"n2": first}})
	if res.Outcome != Updated {
		t.Fatalf("outcome %v", res.Outcome)
	}
	if m := mark(); !m.Since.Equal(t0) || !m.Started.Equal(first) || !m.For(first) || m.For(again) {
		t.Fatalf("mark %+v: want since t0, for the process started at %v only", m, first)
	}
	if n3 := f.Draining()[1]; !n3.Started.IsZero() || !n3.For(first) || !n3.For(again) {
		t.Errorf("a mark that names no process drains any: %+v", n3)
	}
	if res := applyAt(t, f, 2, OperatorReassign{Reason: "drain", Drain: []string{"n2"}, At: t1, Started: map[string]time.Time{"n2": first}}); res.Outcome != Unchanged {
		t.Errorf("the same drain again: outcome %v, want Unchanged", res.Outcome)
	}
	if res := applyAt(t, f, 3, OperatorReassign{Reason: "drain", Drain: []string{"n2"}, At: t1, Started: map[string]time.Time{"n2": again}}); res.Outcome != Updated {
		t.Errorf("a drain of the process started since: outcome %v, want Updated", res.Outcome)
	}
	if m := mark(); !m.Since.Equal(t0) || !m.Started.Equal(again) {
		t.Errorf("mark %+v: want the first time and the new process", m)
	}
	if res := applyAt(t, f, 4, OperatorReassign{Reason: "drain", Drain: []string{"n2"}, At: t1}); res.Outcome != Unchanged || !mark().Started.Equal(again) {
		t.Errorf("a drain that names no process changes nothing: %v %+v", res.Outcome, mark())
	}
	applyAt(t, f, 5, OperatorReassign{Reason: "drain", Undrain: []string{"n2"}})
	if d := f.Draining(); len(d) != 1 || d[0].ID != "n3" {
		t.Errorf("after the clear: %+v", d)
	}
}

// TestDrainMarkWrittenAfterARestart: a drain sent moments after the peer was started again,
// through a gateway whose mesh still held the earlier process's start time, drains the process
// that ran when the mark was written; a process started after the
// mark still does not, and the earlier process is still drained.
func TestDrainMarkWrittenAfterARestart(t *testing.T) {
	earlier, restarted, later := t0.Add(-time.Hour), t0.Add(-time.Second), t0.Add(time.Second)
	m := DrainingPeer{ID: "n2", Since: t0, Started: earlier}
	tests := []struct {
		name    string
		started time.Time
		want    bool
	}{
		{"the process the mark names", earlier, true},
		{"started again before the mark was written", restarted, true},
		{"started again the moment the mark was written", t0, false},
		{"started again after the mark was written", later, false},
		{"a process older than the one the mark names", earlier.Add(-time.Hour), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := m.For(tt.started); got != tt.want {
				t.Errorf("For(%v) = %v, want %v", tt.started, got, tt.want)
			}
		})
	}
}

// TestOperatorReassignSentTwice: a second copy of an applied entry (a forwarder's re-send) moves
// nothing and says each worker is already owned by its target.
func TestOperatorReassignSentTwice(t *testing.T) {
	f := New(testkit.Quiet())
	s := spec(t, "http://127.0.0.1:8001", 0)
	applyAt(t, f, 1, Register{Spec: s, Owner: "n1"})
	cmd := OperatorReassign{Reason: "transfer", Items: []ReassignItem{{ID: s.ID(), From: Fence{Owner: "n1", Epoch: 1}, To: "n2"}}}
	applyAt(t, f, 2, cmd)
	res := applyAt(t, f, 3, cmd)
	want := &ReassignResult{Skipped: []ReassignSkip{{ID: s.ID(), Reason: "already owned by n2"}}}
	if d := cmp.Diff(want, res.Reassign); d != "" || res.Outcome != Unchanged {
		t.Errorf("outcome %v, result (-want +got):\n%s", res.Outcome, d)
	}
}

// TestDrainMarksSurviveSaveAndSnapshot: the marks come back from the saved state (a restart) and
// from a snapshot (a follower that installs it).
func TestDrainMarksSurviveSaveAndSnapshot(t *testing.T) {
	f := New(testkit.Quiet())
	applyAt(t, f, 1, Register{Spec: spec(t, "http://127.0.0.1:8001", 0), Owner: "n1"})
	applyAt(t, f, 2, OperatorReassign{Reason: "drain", Drain: []string{"n1", "n2"}, At: t1, Started: map[string]time.Time{"n2": t0}})
	want := viewOf(f)
	if len(want.Draining) != 2 {
		t.Fatalf("setup: %+v", want.Draining)
	}
	saved, err := f.SaveSince(0)
	if err != nil {
		t.Fatal(err)
	}
	var disk memState
	disk.save(saved.Delta)
	loaded := New(testkit.Quiet())
	if _, ok, err := loaded.Load(&disk); err != nil || !ok {
		t.Fatalf("load: %v %v", ok, err)
	}
	if d := cmp.Diff(want, viewOf(loaded)); d != "" {
		t.Errorf("loaded (-want +got):\n%s", d)
	}
	restored := New(testkit.Quiet())
	if err := restored.Restore(io.NopCloser(bytes.NewReader(persist(t, f)))); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, viewOf(restored)); d != "" {
		t.Errorf("restored (-want +got):\n%s", d)
	}
}
