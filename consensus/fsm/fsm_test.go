package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

var (
	t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Hour)
)

func ptr[T any](v T) *T { return &v }

// spec returns a normalized spec for url with the given priority (0 = unset).
func spec(t testing.TB, url string, priority int) worker.Spec {
	t.Helper()
	s := worker.Spec{URL: url, Labels: map[string]string{"zone": "a"}, APIKey: "sk-secret"}
	if priority != 0 {
		s.Priority = ptr(priority)
	}
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	return s
}

// applyAt encodes c and applies it at index.
func applyAt(t testing.TB, f *FSM, index uint64, c Command) Result {
	t.Helper()
	data, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	res, ok := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data}).(Result)
	if !ok {
		t.Fatalf("Apply returned %T, want Result", res)
	}
	return res
}

// TestApply runs every command against the states that matter to it. Setup commands apply at
// indexes 1, 2, ...; the command under test at index 100.
func TestApply(t *testing.T) {
	specA := spec(t, "http://127.0.0.1:8001", 0)
	specB := spec(t, "http://127.0.0.1:8001", 70) // same id, another spec
	id := specA.ID()
	reg := Register{Spec: specA, Owner: "n1", At: t0}
	base := Record{ID: id, Spec: specA, Owner: "n1", Epoch: 1, RegisteredAt: t0, Revision: 1}
	with := func(edit func(r *Record)) *Record { r := base.Clone(); edit(&r); return &r }
	disable := FlagChange{Disabled: ptr(true), Reason: "maintenance", By: "ops", At: t0}
	disabledAt2 := with(func(r *Record) {
		r.Disabled, r.DisabledReason, r.DisabledBy, r.DisabledAt, r.Revision = true, "maintenance", "ops", t0, 2
	})
	flagged := []Command{reg, SetFlags{ID: id, Flags: FlagChange{
		Disabled: ptr(true), Reason: "maintenance", By: "ops", At: t0, IsDead: ptr(true)}}}
	flaggedRec := with(func(r *Record) {
		r.Disabled, r.DisabledReason, r.DisabledBy, r.DisabledAt = true, "maintenance", "ops", t0
		r.IsDead, r.Revision = true, 2
	})
	drain := Drain{ID: id, At: t0, Settle: 5 * time.Second}
	drainingRec := with(func(r *Record) { r.Draining, r.DrainStartedAt, r.DrainSettle, r.Revision = true, t0, 5*time.Second, 2 })

	tests := []struct {
		name    string
		setup   []Command
		cmd     Command
		want    Outcome
		wantErr error   // sentinel for errors.Is
		wantRec *Record // the record of id afterwards; nil: none
	}{
		{"register/new", nil, reg, Created, nil,
			with(func(r *Record) { r.Epoch, r.Revision = 100, 100 })},
		{"register/named owner", nil, Register{Spec: specA, Owner: "n9", At: t0}, Created, nil,
			with(func(r *Record) { r.Owner, r.Epoch, r.Revision = "n9", 100, 100 })},
		{"register/exists same spec", []Command{reg}, reg, Unchanged, nil, &base},
		{"register/exists same spec other owner", []Command{reg},
			Register{Spec: specA, Owner: "n2", At: t1}, Unchanged, nil, &base},
		{"register/exists other spec", []Command{reg},
			Register{Spec: specB, Owner: "n1", At: t1}, Rejected, ErrConflict, &base},
		{"register/never clears flags", flagged, reg, Unchanged, nil, flaggedRec},
		{"register/conflict keeps flags", flagged,
			Register{Spec: specB, Owner: "n1"}, Rejected, ErrConflict, flaggedRec},
		{"register/empty owner", nil, Register{Spec: specA}, Rejected, ErrInvalid, nil},

		{"replace/missing", nil, ReplaceSpec{ID: id, Spec: specB}, Rejected, ErrNotFound, nil},
		{"replace/same spec", []Command{reg}, ReplaceSpec{ID: id, Spec: specA}, Unchanged, nil, &base},
		{"replace/other spec", []Command{reg}, ReplaceSpec{ID: id, Spec: specB}, Updated, nil,
			with(func(r *Record) { r.Spec, r.Revision = specB, 100 })},
		{"replace/cas match", []Command{reg}, ReplaceSpec{ID: id, Spec: specB, ExpectedRevision: 1},
			Updated, nil, with(func(r *Record) { r.Spec, r.Revision = specB, 100 })},
		{"replace/cas mismatch", []Command{reg}, ReplaceSpec{ID: id, Spec: specB, ExpectedRevision: 7},
			Rejected, ErrConflict, &base},
		{"replace/keeps flags", flagged, ReplaceSpec{ID: id, Spec: specB}, Updated, nil,
			func() *Record { r := flaggedRec.Clone(); r.Spec, r.Revision = specB, 100; return &r }()},
		{"replace/with flags", []Command{reg}, ReplaceSpec{ID: id, Spec: specB, Flags: disable}, Updated, nil,
			with(func(r *Record) {
				r.Spec, r.Disabled, r.DisabledReason, r.DisabledBy, r.DisabledAt = specB, true, "maintenance", "ops", t0
				r.Revision = 100
			})},
		{"replace/same spec flags only", []Command{reg}, ReplaceSpec{ID: id, Spec: specA, Flags: disable},
			Updated, nil, with(func(r *Record) {
				r.Disabled, r.DisabledReason, r.DisabledBy, r.DisabledAt, r.Revision = true, "maintenance", "ops", t0, 100
			})},

		{"flags/missing", nil, SetFlags{ID: id, Flags: disable}, Rejected, ErrNotFound, nil},
		{"flags/disable", []Command{reg}, SetFlags{ID: id, Flags: disable}, Updated, nil,
			with(func(r *Record) {
				r.Disabled, r.DisabledReason, r.DisabledBy, r.DisabledAt, r.Revision = true, "maintenance", "ops", t0, 100
			})},
		{"flags/disable again is idempotent", []Command{reg, SetFlags{ID: id, Flags: disable}},
			SetFlags{ID: id, Flags: FlagChange{Disabled: ptr(true), Reason: "maintenance", By: "ops", At: t1}},
			Unchanged, nil, disabledAt2},
		{"flags/disable with another reason", []Command{reg, SetFlags{ID: id, Flags: disable}},
			SetFlags{ID: id, Flags: FlagChange{Disabled: ptr(true), Reason: "weight update", By: "journal", At: t1}},
			Updated, nil, with(func(r *Record) {
				r.Disabled, r.DisabledReason, r.DisabledBy, r.DisabledAt, r.Revision = true, "weight update", "journal", t1, 100
			})},
		{"flags/enable clears who and why", []Command{reg, SetFlags{ID: id, Flags: disable}},
			SetFlags{ID: id, Flags: FlagChange{Disabled: ptr(false), At: t1}}, Updated, nil,
			with(func(r *Record) { r.Revision = 100 })},
		{"flags/enable when enabled", []Command{reg}, SetFlags{ID: id, Flags: FlagChange{Disabled: ptr(false)}},
			Unchanged, nil, &base},
		{"flags/quarantine", []Command{reg}, SetFlags{ID: id, Flags: FlagChange{IsDead: ptr(true)}}, Updated, nil,
			with(func(r *Record) { r.IsDead, r.Revision = true, 100 })},
		{"flags/unquarantine keeps disabled", flagged, SetFlags{ID: id, Flags: FlagChange{IsDead: ptr(false)}},
			Updated, nil, func() *Record { r := flaggedRec.Clone(); r.IsDead, r.Revision = false, 100; return &r }()},
		{"flags/empty change", []Command{reg}, SetFlags{ID: id}, Unchanged, nil, &base},
		{"flags/cas match", []Command{reg}, SetFlags{ID: id, Flags: disable, ExpectedRevision: 1}, Updated, nil,
			with(func(r *Record) {
				r.Disabled, r.DisabledReason, r.DisabledBy, r.DisabledAt, r.Revision = true, "maintenance", "ops", t0, 100
			})},
		{"flags/cas mismatch", []Command{reg}, SetFlags{ID: id, Flags: disable, ExpectedRevision: 2},
			Rejected, ErrConflict, &base},

		{"remove/missing", nil, Remove{ID: id}, Rejected, ErrNotFound, nil},
		{"remove/unconditional", flagged, Remove{ID: id}, Removed, nil, nil},
		{"remove/fence match", []Command{reg}, Remove{ID: id, Fence: &Fence{Owner: "n1", Epoch: 1}}, Removed, nil, nil},
		{"remove/fence other owner", []Command{reg}, Remove{ID: id, Fence: &Fence{Owner: "n2", Epoch: 1}},
			Rejected, ErrConflict, &base},
		{"remove/fence stale epoch", []Command{reg, Transfer{ID: id, To: "n2"}, Transfer{ID: id, To: "n1"}},
			Remove{ID: id, Fence: &Fence{Owner: "n1", Epoch: 1}}, Rejected, ErrConflict,
			with(func(r *Record) { r.Epoch, r.Revision = 3, 3 })},

		{"transfer/missing", nil, Transfer{ID: id, To: "n2"}, Rejected, ErrNotFound, nil},
		{"transfer/bumps epoch", []Command{reg}, Transfer{ID: id, To: "n2"}, Updated, nil,
			with(func(r *Record) { r.Owner, r.Epoch, r.Revision = "n2", 100, 100 })},
		{"transfer/keeps flags", flagged, Transfer{ID: id, To: "n2"}, Updated, nil,
			func() *Record { r := flaggedRec.Clone(); r.Owner, r.Epoch, r.Revision = "n2", 100, 100; return &r }()},
		{"transfer/to owner", []Command{reg}, Transfer{ID: id, To: "n1"}, Unchanged, nil, &base},
		{"transfer/cas match", []Command{reg}, Transfer{ID: id, To: "n2", ExpectedEpoch: 1}, Updated, nil,
			with(func(r *Record) { r.Owner, r.Epoch, r.Revision = "n2", 100, 100 })},
		{"transfer/cas mismatch", []Command{reg}, Transfer{ID: id, To: "n2", ExpectedEpoch: 5},
			Rejected, ErrConflict, &base},
		{"transfer/empty target", []Command{reg}, Transfer{ID: id}, Rejected, ErrInvalid, &base},
		{"transfer/keeps draining", []Command{reg, drain}, Transfer{ID: id, To: "n2"}, Updated, nil,
			func() *Record { r := drainingRec.Clone(); r.Owner, r.Epoch, r.Revision = "n2", 100, 100; return &r }()},

		{"drain/missing", nil, drain, Rejected, ErrNotFound, nil},
		{"drain/starts", []Command{reg}, drain, Updated, nil,
			with(func(r *Record) {
				r.Draining, r.DrainStartedAt, r.DrainSettle, r.Revision = true, t0, 5*time.Second, 100
			})},
		{"drain/keeps flags", flagged, drain, Updated, nil, func() *Record {
			r := flaggedRec.Clone()
			r.Draining, r.DrainStartedAt, r.DrainSettle, r.Revision = true, t0, 5*time.Second, 100
			return &r
		}()},
		{"drain/again keeps the first deadline", []Command{reg, drain},
			Drain{ID: id, At: t1, Settle: time.Minute}, Unchanged, nil, drainingRec},
		{"drain/zero settle", []Command{reg}, Drain{ID: id, At: t0}, Updated, nil,
			with(func(r *Record) { r.Draining, r.DrainStartedAt, r.Revision = true, t0, 100 })},
		{"drain/unset time", []Command{reg}, Drain{ID: id, Settle: time.Second}, Rejected, ErrInvalid, &base},
		{"drain/negative settle", []Command{reg}, Drain{ID: id, At: t0, Settle: -time.Second}, Rejected, ErrInvalid, &base},
		{"register/draining is a conflict", []Command{reg, drain}, reg, Rejected, ErrConflict, drainingRec},
		{"flags/keep draining", []Command{reg, drain}, SetFlags{ID: id, Flags: disable}, Updated, nil,
			func() *Record {
				r := drainingRec.Clone()
				r.Disabled, r.DisabledReason, r.DisabledBy, r.DisabledAt, r.Revision = true, "maintenance", "ops", t0, 100
				return &r
			}()},
		{"replace/keeps draining", []Command{reg, drain}, ReplaceSpec{ID: id, Spec: specB}, Updated, nil,
			func() *Record { r := drainingRec.Clone(); r.Spec, r.Revision = specB, 100; return &r }()},
		{"remove/fenced end of a drain", []Command{reg, drain}, Remove{ID: id, Fence: &Fence{Owner: "n1", Epoch: 1}},
			Removed, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(testkit.Quiet())
			for i, c := range tt.setup {
				if res := applyAt(t, f, uint64(i+1), c); res.Err != nil {
					t.Fatalf("setup %d (%T): %v", i, c, res.Err)
				}
			}
			before := f.Version()
			res := applyAt(t, f, 100, tt.cmd)
			if res.Outcome != tt.want || res.Index != 100 {
				t.Errorf("outcome %v at %d, want %v at 100 (err %v)", res.Outcome, res.Index, tt.want, res.Err)
			}
			if !errors.Is(res.Err, tt.wantErr) || (tt.wantErr == nil) != (res.Err == nil) {
				t.Errorf("err = %v, want %v", res.Err, tt.wantErr)
			}
			got, ok := f.Worker(id)
			if tt.wantRec == nil && ok {
				t.Errorf("record %+v exists, want none", got)
			}
			if tt.wantRec != nil {
				if diff := cmp.Diff(*tt.wantRec, got); !ok || diff != "" {
					t.Errorf("record (-want +got):\n%s", diff)
				}
			}
			if f.AppliedIndex() != 100 {
				t.Errorf("applied index %d, want 100", f.AppliedIndex())
			}
			if bumped := f.Version() > before; bumped != res.Outcome.Changed() {
				t.Errorf("version bumped = %v for outcome %v", bumped, res.Outcome)
			}
		})
	}
}

// TestResultRecord checks what Result.Record holds, and that it is the caller's copy.
func TestResultRecord(t *testing.T) {
	specA := spec(t, "http://127.0.0.1:8001", 0)
	id := specA.ID()
	f := New(testkit.Quiet())
	res := applyAt(t, f, 1, Register{Spec: specA, Owner: "n1", At: t0})
	if res.Record == nil || res.Record.ID != id || res.Record.Epoch != 1 {
		t.Fatalf("created record = %+v", res.Record)
	}
	res.Record.Spec.Labels["zone"] = "mutated"
	res.Record.Owner = "mutated"
	if got, _ := f.Worker(id); got.Owner != "n1" || got.Spec.Labels["zone"] != "a" {
		t.Fatalf("mutating a result changed the state: %+v", got)
	}
	res = applyAt(t, f, 2, Register{Spec: spec(t, "http://127.0.0.1:8001", 5), Owner: "n1"})
	if res.Record == nil || res.Record.Revision != 1 {
		t.Fatalf("a conflict carries the existing record, got %+v", res.Record)
	}
	var ce *ConflictError
	if !errors.As(res.Err, &ce) || ce.ID != id {
		t.Fatalf("err = %#v, want *ConflictError for %s", res.Err, id)
	}
	res = applyAt(t, f, 3, Remove{ID: id})
	if res.Record == nil || res.Record.ID != id {
		t.Fatalf("a removal carries the removed record, got %+v", res.Record)
	}
	res = applyAt(t, f, 4, Remove{ID: id})
	var nf *NotFoundError
	if !errors.As(res.Err, &nf) || nf.ID != id || res.Record != nil {
		t.Fatalf("second removal: %+v", res)
	}
}

func TestInitCluster(t *testing.T) {
	tests := []struct {
		name    string
		setup   string // cluster id already set; "" for none
		cmd     string
		want    Outcome
		wantErr error
		wantID  string
	}{
		{"new", "", "c-1", Created, nil, "c-1"},
		{"same id", "c-1", "c-1", Unchanged, nil, "c-1"},
		{"other id", "c-1", "c-2", Rejected, ErrConflict, "c-1"},
		{"empty id", "", "", Rejected, ErrInvalid, ""},
		{"empty id when set", "c-1", "", Rejected, ErrConflict, "c-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(testkit.Quiet())
			if tt.setup != "" {
				applyAt(t, f, 1, InitCluster{ClusterID: tt.setup})
			}
			res := applyAt(t, f, 2, InitCluster{ClusterID: tt.cmd})
			if res.Outcome != tt.want || !errors.Is(res.Err, tt.wantErr) || (tt.wantErr == nil) != (res.Err == nil) {
				t.Errorf("got %v, %v; want %v, %v", res.Outcome, res.Err, tt.want, tt.wantErr)
			}
			if got := f.ClusterID(); got != tt.wantID {
				t.Errorf("cluster id %q, want %q", got, tt.wantID)
			}
		})
	}
}

// TestUndecodablePanics: an entry this node cannot decode must stop it rather than let its
// state diverge; only IgnoreUnknownFlag makes an unknown type skippable.
func TestUndecodablePanics(t *testing.T) {
	truncated := []byte{0x0a, 0x05, 'a'} // field 1, length 5, one byte present
	tests := []struct {
		name string
		data []byte
	}{
		{"empty entry", nil},
		{"unknown type", []byte{100}},
	}
	for typ := range typeNames {
		if handlers[typ] != nil {
			tests = append(tests, struct {
				name string
				data []byte
			}{"truncated " + typ.String(), append([]byte{byte(typ)}, truncated...)})
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(testkit.Quiet())
			defer func() {
				if recover() == nil {
					t.Fatalf("Apply(%x) did not panic", tt.data)
				}
			}()
			f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: tt.data})
		})
	}
}

func TestIgnoreUnknownFlag(t *testing.T) {
	f := New(testkit.Quiet())
	before := f.Version()
	res := f.Apply(&raft.Log{Index: 7, Data: []byte{byte(IgnoreUnknownFlag | 42), 1, 2, 3}}).(Result)
	if res.Outcome != Ignored || res.Err != nil || f.AppliedIndex() != 7 || f.Version() != before {
		t.Fatalf("got %+v, applied %d, version %d", res, f.AppliedIndex(), f.Version())
	}
	// A known type with the flag applies as usual.
	data, err := Encode(InitCluster{ClusterID: "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	data[0] |= byte(IgnoreUnknownFlag)
	res = f.Apply(&raft.Log{Index: 8, Data: data}).(Result)
	if res.Outcome != Created || f.ClusterID() != "c-1" {
		t.Fatalf("flagged known type: %+v", res)
	}
}

// TestInvalidBodies covers what the Command API cannot produce: a decodable body that breaks a
// rule is a rejection, not a panic.
func TestInvalidBodies(t *testing.T) {
	f := New(testkit.Quiet())
	// A register command with an owner but no id: field 3 (owner) = "n1".
	res := f.Apply(&raft.Log{Index: 1, Data: []byte{byte(TypeRegister), 0x1a, 0x02, 'n', '1'}}).(Result)
	if !errors.Is(res.Err, ErrInvalid) || f.Len() != 0 {
		t.Fatalf("got %+v", res)
	}
}

// AppliedSignal closes after every entry, one that changes nothing included (Watch stays
// quiet for those), so that a wait for an index needs no polling.
func TestAppliedSignal(t *testing.T) {
	f := New(testkit.Quiet())
	specA := spec(t, "http://127.0.0.1:8001", 0)
	for i, c := range []Command{
		Register{Spec: specA, Owner: "n1"},
		Register{Spec: specA, Owner: "n1"}, // unchanged
		Transfer{ID: "missing", To: "n2"},  // rejected
	} {
		sig := f.AppliedSignal()
		select {
		case <-sig:
			t.Fatalf("entry %d: the signal closed before the entry applied", i+1)
		default:
		}
		applyAt(t, f, uint64(i+1), c)
		select {
		case <-sig:
		default:
			t.Fatalf("entry %d applied without closing the signal", i+1)
		}
		if got := f.AppliedIndex(); got != uint64(i+1) {
			t.Fatalf("entry %d: applied index %d", i+1, got)
		}
	}
}

func TestWatch(t *testing.T) {
	f := New(testkit.Quiet())
	ch, stop := f.Watch()
	defer stop()
	specA := spec(t, "http://127.0.0.1:8001", 0)
	applyAt(t, f, 1, Register{Spec: specA, Owner: "n1"})
	applyAt(t, f, 2, Transfer{ID: specA.ID(), To: "n2"})
	select {
	case <-ch:
	default:
		t.Fatal("no signal after two changes")
	}
	select {
	case <-ch:
		t.Fatal("two changes gave two signals; they must coalesce")
	default:
	}
	applyAt(t, f, 3, Register{Spec: specA, Owner: "n1"}) // unchanged
	select {
	case <-ch:
		t.Fatal("a no-op signalled")
	default:
	}
	if f.Version() != 2 {
		t.Fatalf("version %d, want 2", f.Version())
	}
	stop()
	applyAt(t, f, 4, Remove{ID: specA.ID()})
	select {
	case <-ch:
		t.Fatal("a stopped watch signalled")
	default:
	}
}

func TestRecordLogValueHidesSpec(t *testing.T) {
	r := Record{ID: "w-1", Spec: worker.Spec{URL: "http://h:1", APIKey: "sk-secret"}, Owner: "n1"}
	if s := r.LogValue().String(); s == "" || strings.Contains(s, "sk-secret") {
		t.Fatalf("log value %q", s)
	}
}

// TestWorkersSharedIsAStableView: the shared records are the stored ones at the time of the
// call; later commands store new records and never change what a reader already holds.
func TestWorkersSharedIsAStableView(t *testing.T) {
	f := New(testkit.Quiet())
	a, b := spec(t, "http://10.0.0.1:8000", 0), spec(t, "http://10.0.0.2:8000", 0)
	applyAt(t, f, 1, Register{Spec: a, Owner: "n1"})
	applyAt(t, f, 2, Register{Spec: b, Owner: "n1"})
	got := f.WorkersShared()
	if len(got) != 2 {
		t.Fatalf("%d records, want 2", len(got))
	}
	held := map[worker.ID]Record{}
	for _, r := range got {
		held[r.ID] = r
	}
	applyAt(t, f, 3, SetFlags{ID: a.ID(), Flags: FlagChange{Disabled: ptr(true), By: "t"}})
	applyAt(t, f, 4, Transfer{ID: b.ID(), To: "n2"})
	if r := held[a.ID()]; r.Disabled || r.Revision != 1 || r.Spec.Labels["zone"] != "a" {
		t.Errorf("a held record changed under the reader: %+v", r)
	}
	if r := held[b.ID()]; r.Owner != "n1" {
		t.Errorf("a held record's owner changed under the reader: %q", r.Owner)
	}
	now := map[worker.ID]Record{}
	for _, r := range f.WorkersShared() {
		now[r.ID] = r
	}
	if !now[a.ID()].Disabled || now[b.ID()].Owner != "n2" {
		t.Errorf("a new call does not see the commands: %+v", now)
	}
}
