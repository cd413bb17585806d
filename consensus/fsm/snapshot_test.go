package fsm

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// sink is an in-memory raft.SnapshotSink.
type sink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *sink) ID() string    { return "test" }
func (s *sink) Cancel() error { s.cancelled = true; return nil }
func (s *sink) Close() error  { s.closed = true; return nil }

func persist(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var s sink
	if err := snap.Persist(&s); err != nil || !s.closed || s.cancelled {
		t.Fatalf("persist: %v (closed %v, cancelled %v)", err, s.closed, s.cancelled)
	}
	return s.Bytes()
}

// view is everything a reader can see of an FSM.
type view struct {
	ClusterID string
	Applied   uint64
	Workers   []Record
	Journal   []JournalRecord
	Draining  []DrainingPeer
}

func viewOf(f *FSM) view {
	return view{f.ClusterID(), f.AppliedIndex(), f.Workers(), f.Journal(), f.Draining()}
}

// bigFSM applies n registrations and a mix of flag changes, transfers and drains, and puts two records
// in the journal.
func bigFSM(t testing.TB, n int) *FSM {
	t.Helper()
	f := New(testkit.Quiet())
	idx := uint64(1)
	applyAt(t, f, idx, InitCluster{ClusterID: "0b6c5f1e-7d1a-4f7e-9b7e-3a1d2c4b5e6f"})
	for i := range n {
		s := spec(t, fmt.Sprintf("http://10.%d.%d.%d:8000", i>>16&255, i>>8&255, i&255), i%100+1)
		if i%3 == 0 {
			s.Health = &worker.Health{CheckIntervalSecs: ptr(i%7 + 1), DisableHealthCheck: ptr(i%2 == 0)}
		}
		idx++
		res := applyAt(t, f, idx, Register{Spec: s, Owner: fmt.Sprintf("n%d", i%5), At: t0})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		idx++
		switch i % 4 {
		case 1:
			applyAt(t, f, idx, SetFlags{ID: s.ID(), Flags: FlagChange{Disabled: ptr(true), Reason: "r", By: "ops", At: t1}})
		case 2:
			applyAt(t, f, idx, Transfer{ID: s.ID(), To: "n9"})
		case 3:
			applyAt(t, f, idx, SetFlags{ID: s.ID(), Flags: FlagChange{IsDead: ptr(true)}})
		}
		if i%5 == 4 {
			idx++
			applyAt(t, f, idx, Drain{ID: s.ID(), At: t1, Settle: time.Duration(i) * time.Millisecond})
		}
	}
	f.st.journal = []*JournalRecord{
		{ID: "j-1", Targets: []worker.ID{"w-a", "w-b"}, Outcomes: map[worker.ID]string{"w-a": "updated"},
			Coordinator: "n1", StartedAt: t0},
		{ID: "j-2", Coordinator: "n2"},
	}
	return f
}

func TestSnapshotRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		fsm  func(t *testing.T) *FSM
	}{
		{"empty", func(*testing.T) *FSM { return New(testkit.Quiet()) }},
		{"10000 workers", func(t *testing.T) *FSM { return bigFSM(t, 10000) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.fsm(t)
			data := persist(t, src)
			dst := New(testkit.Quiet())
			before := dst.Version()
			if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(viewOf(src), viewOf(dst)); diff != "" {
				t.Fatalf("restored state differs (-want +got):\n%s", diff)
			}
			if dst.Version() == before {
				t.Error("restore did not signal a change")
			}
			if again := persist(t, dst); !bytes.Equal(again, data) {
				t.Error("persisting the restored state gives other bytes: snapshots are not deterministic")
			}
		})
	}
}

// TestSnapshotIsPointInTime: entries applied after Snapshot and before Persist are not in it.
func TestSnapshotIsPointInTime(t *testing.T) {
	f := New(testkit.Quiet())
	a, b := spec(t, "http://127.0.0.1:8001", 0), spec(t, "http://127.0.0.1:8002", 0)
	applyAt(t, f, 1, Register{Spec: a, Owner: "n1"})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	applyAt(t, f, 2, Register{Spec: b, Owner: "n1"})
	applyAt(t, f, 3, Transfer{ID: a.ID(), To: "n2"})
	var s sink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	dst := New(testkit.Quiet())
	if err := dst.Restore(io.NopCloser(&s.Buffer)); err != nil {
		t.Fatal(err)
	}
	got, _ := dst.Worker(a.ID())
	if dst.Len() != 1 || got.Owner != "n1" || dst.AppliedIndex() != 1 {
		t.Fatalf("snapshot holds %d workers, owner %q, applied %d; want 1, n1, 1", dst.Len(), got.Owner, dst.AppliedIndex())
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	dup, _ := proto.Marshal(&consensusv1.Snapshot{Workers: []*consensusv1.WorkerRecord{{Id: "w-1"}, {Id: "w-1"}}})
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"unknown format", []byte{9, 1, 2}},
		{"bad protobuf", []byte{snapshotFormat, 0x0a, 0x05, 'a'}},
		{"duplicate id", append([]byte{snapshotFormat}, dup...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := bigFSM(t, 3)
			want := viewOf(f)
			if err := f.Restore(io.NopCloser(bytes.NewReader(tt.data))); err == nil {
				t.Fatal("Restore accepted garbage")
			}
			if diff := cmp.Diff(want, viewOf(f)); diff != "" {
				t.Fatalf("a failed restore changed the state:\n%s", diff)
			}
		})
	}
}

// TestSpecMirrorComplete fills every field of worker.Spec, recursively, and checks that the
// protobuf mirror carries all of them: it fails when worker.Spec gains a field that
// convert.go does not map.
func TestSpecMirrorComplete(t *testing.T) {
	var s worker.Spec
	n := 0
	fill(t, reflect.ValueOf(&s).Elem(), &n)
	data, err := proto.Marshal(specToProto(&s))
	if err != nil {
		t.Fatal(err)
	}
	var p consensusv1.WorkerSpec
	if err := proto.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, specFromProto(&p)); diff != "" {
		t.Fatalf("spec fields lost through protobuf (-want +got):\n%s", diff)
	}
	// And an empty spec stays empty: nil pointers and nil collections, not zero values.
	if diff := cmp.Diff(worker.Spec{}, specFromProto(specToProto(&worker.Spec{}))); diff != "" {
		t.Fatalf("empty spec (-want +got):\n%s", diff)
	}
}

// fill sets every field reachable from v to a distinct non-zero value.
func fill(t *testing.T, v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("v%d", *n))
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), n)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fill(t, s.Index(0), n)
		fill(t, s.Index(1), n)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, n)
		fill(t, e, n)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), n)
		}
	default:
		t.Fatalf("fill: %s is a %s; teach fill and convert.go about it", v.Type(), v.Kind())
	}
}

func TestCommandTypeString(t *testing.T) {
	for typ, name := range typeNames {
		if typ.String() != name || strings.HasPrefix(name, "unknown") {
			t.Errorf("%d: %q", typ, typ.String())
		}
	}
	if got := CommandType(77).String(); got != "unknown_77" {
		t.Errorf("unknown type: %q", got)
	}
}

var _ raft.SnapshotSink = (*sink)(nil)
