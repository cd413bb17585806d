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

// journalFSM has three workers a, b, c; c was disabled by an operator before any update.
func journalFSM(t *testing.T) (*FSM, [3]worker.ID, *uint64) {
	t.Helper()
	f := New(testkit.Quiet())
	idx := uint64(0)
	var ids [3]worker.ID
	for i, u := range []string{"http://10.0.0.1:8000", "http://10.0.0.2:8000", "http://10.0.0.3:8000"} {
		s := spec(t, u, 0)
		ids[i] = s.ID()
		idx++
		applyAt(t, f, idx, Register{Spec: s, Owner: "n1", At: time.Unix(1, 0)})
	}
	idx++
	applyAt(t, f, idx, SetFlags{ID: ids[2], Flags: FlagChange{Disabled: ptr(true), Reason: "broken", By: "ops", At: time.Unix(2, 0)}})
	return f, ids, &idx
}

func (f *FSM) mustWorker(t *testing.T, id worker.ID) Record {
	t.Helper()
	r, ok := f.Worker(id)
	if !ok {
		t.Fatalf("no record %s", id)
	}
	return r
}

func next(idx *uint64) uint64 { *idx++; return *idx }

// A weight update disables its targets on open and, once every target is updated, re-enables
// those it disabled; a target an operator had disabled before stays disabled, with its reason.
// A second update is refused while one is open.
func TestJournalOpenAndComplete(t *testing.T) {
	f, ids, idx := journalFSM(t)
	res := applyAt(t, f, next(idx), JournalOpen{ID: "u1", Coordinator: "n1", Targets: ids[:], At: time.Unix(3, 0)})
	if res.Outcome != Created || res.Journal == nil || res.Journal.Status != JournalRunning {
		t.Fatalf("open: %+v", res)
	}
	for _, id := range ids {
		if !f.mustWorker(t, id).Disabled {
			t.Fatalf("target %s not disabled by the open", id)
		}
	}
	if r := f.mustWorker(t, ids[2]); r.DisabledReason != "broken" {
		t.Fatalf("a target disabled before the update got reason %q", r.DisabledReason)
	}
	res = applyAt(t, f, next(idx), JournalOpen{ID: "u2", Coordinator: "n2", Targets: ids[:1], At: time.Unix(4, 0)})
	if !errors.Is(res.Err, ErrConflict) || res.Err.Error() != "conflict: weight update u1 is unresolved" {
		t.Fatalf("a second open while u1 is open: %+v", res)
	}
	res = applyAt(t, f, next(idx), JournalResolve{ID: "u1", Action: ResolveComplete})
	if !errors.Is(res.Err, ErrConflict) {
		t.Fatalf("complete with targets pending: %+v", res)
	}
	for _, id := range ids {
		applyAt(t, f, next(idx), JournalResolve{ID: "u1", Action: ResolveOutcome, Target: id, Outcome: OutcomeUpdated})
	}
	res = applyAt(t, f, next(idx), JournalResolve{ID: "u1", Action: ResolveComplete})
	if res.Outcome != Removed || len(f.Journal()) != 0 {
		t.Fatalf("complete: %+v, journal %+v", res, f.Journal())
	}
	if f.mustWorker(t, ids[0]).Disabled || f.mustWorker(t, ids[1]).Disabled {
		t.Fatal("a target the update disabled stayed disabled after it completed")
	}
	if r := f.mustWorker(t, ids[2]); !r.Disabled || r.DisabledReason != "broken" {
		t.Fatalf("the target disabled before the update: %+v", r)
	}
}

// A running record reads failed once every target has an outcome and one of them is not
// updated: derived from the replicated record, with no command of its own (a gateway of an
// older version applies the same entries and agrees). Stored statuses other than running win.
func TestJournalFailedState(t *testing.T) {
	f, ids, idx := journalFSM(t)
	applyAt(t, f, next(idx), JournalOpen{ID: "u1", Coordinator: "n1", Targets: ids[:2], At: time.Unix(3, 0)})
	state := func() string { j := f.Journal(); return j[0].State() }
	applyAt(t, f, next(idx), JournalResolve{ID: "u1", Action: ResolveOutcome, Target: ids[0], Outcome: OutcomeFailed})
	if got := state(); got != JournalRunning {
		t.Fatalf("one target still pending: %s, want %s", got, JournalRunning)
	}
	applyAt(t, f, next(idx), JournalResolve{ID: "u1", Action: ResolveOutcome, Target: ids[1], Outcome: OutcomeUpdated})
	if got := state(); got != JournalFailed {
		t.Fatalf("every outcome in, one failed: %s, want %s", got, JournalFailed)
	}
	for _, id := range ids[:2] {
		if r, _ := f.Worker(id); !r.Disabled {
			t.Fatalf("%s enabled while its failed record is open", id)
		}
	}
	applyAt(t, f, next(idx), JournalResolve{ID: "u1", Action: ResolveCoordinatorLost})
	if got := state(); got != JournalCoordinatorLost {
		t.Fatalf("a stored status: %s, want %s", got, JournalCoordinatorLost)
	}
	if res := applyAt(t, f, next(idx), JournalResolve{ID: "u1", Action: "failed"}); res.Err == nil {
		t.Fatalf("a 'failed' action applied: %+v; the state is derived, not written", res)
	}
}

// An interrupted update keeps its record and its targets disabled. Enabling a target takes it
// out of the record, and the record closes once empty; acknowledging closes it and leaves the
// targets disabled.
func TestJournalInterruptedRecord(t *testing.T) {
	f, ids, idx := journalFSM(t)
	applyAt(t, f, next(idx), JournalOpen{ID: "u1", Coordinator: "n1", Targets: ids[:2], At: time.Unix(3, 0)})
	applyAt(t, f, next(idx), JournalResolve{ID: "u1", Action: ResolveOutcome, Target: ids[0], Outcome: OutcomeFailed})
	res := applyAt(t, f, next(idx), JournalResolve{ID: "u1", Action: ResolveCoordinatorLost})
	if res.Outcome != Updated || res.Journal.Status != JournalCoordinatorLost {
		t.Fatalf("coordinator lost: %+v", res)
	}
	applyAt(t, f, next(idx), SetFlags{ID: ids[0], Flags: FlagChange{Disabled: ptr(false), By: "ops"}})
	j := f.Journal()
	if len(j) != 1 || !cmp.Equal(j[0].Targets, []worker.ID{ids[1]}) {
		t.Fatalf("after enabling %s: journal %+v", ids[0], j)
	}
	applyAt(t, f, next(idx), SetFlags{ID: ids[1], Flags: FlagChange{Disabled: ptr(false), By: "ops"}})
	if j := f.Journal(); len(j) != 0 {
		t.Fatalf("the record stayed open with no target: %+v", j)
	}

	applyAt(t, f, next(idx), JournalOpen{ID: "u2", Coordinator: "n1", Targets: ids[:2], At: time.Unix(5, 0)})
	res = applyAt(t, f, next(idx), JournalResolve{ID: "u2", Action: ResolveAcknowledge, By: "ops"})
	if res.Outcome != Removed || len(res.Journal.Targets) != 2 || len(f.Journal()) != 0 {
		t.Fatalf("acknowledge: %+v", res)
	}
	if !f.mustWorker(t, ids[0]).Disabled || !f.mustWorker(t, ids[1]).Disabled {
		t.Fatal("acknowledging re-enabled the targets")
	}
	res = applyAt(t, f, next(idx), JournalResolve{ID: "u2", Action: ResolveAcknowledge})
	if !errors.Is(res.Err, ErrNotFound) {
		t.Fatalf("resolving a closed record: %+v", res)
	}
}

// An update whose disable was not acknowledged in time is closed as not started: the targets it
// disabled are enabled again. Removing a target takes it out of the record.
func TestJournalNotStartedAndRemoval(t *testing.T) {
	f, ids, idx := journalFSM(t)
	applyAt(t, f, next(idx), JournalOpen{ID: "u1", Coordinator: "n1", Targets: ids[:2], At: time.Unix(3, 0)})
	applyAt(t, f, next(idx), Remove{ID: ids[1]})
	if j := f.Journal(); len(j) != 1 || len(j[0].Targets) != 1 {
		t.Fatalf("after removing a target: %+v", j)
	}
	applyAt(t, f, next(idx), JournalResolve{ID: "u1", Action: ResolveNotStarted})
	if f.mustWorker(t, ids[0]).Disabled || len(f.Journal()) != 0 {
		t.Fatal("not started: the target stayed disabled or the record open")
	}
}

// The journal, its prior-disabled targets and status included, survives a snapshot and the
// saved state.
func TestJournalSnapshotRoundTrip(t *testing.T) {
	f, ids, idx := journalFSM(t)
	applyAt(t, f, next(idx), JournalOpen{ID: "u1", Coordinator: "n1", Targets: ids[:], At: time.Unix(3, 0)})
	applyAt(t, f, next(idx), JournalResolve{ID: "u1", Action: ResolveInterrupted})
	g := New(testkit.Quiet())
	if err := g.Restore(io.NopCloser(bytes.NewReader(persist(t, f)))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f.Journal(), g.Journal()); diff != "" {
		t.Fatalf("journal after a restore (-want +got):\n%s", diff)
	}
	if j := g.Journal()[0]; j.Status != JournalInterrupted || !cmp.Equal(j.PriorDisabled, []worker.ID{ids[2]}) {
		t.Fatalf("restored record: %+v", j)
	}
}
