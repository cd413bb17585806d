package forward

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// fullRecord returns a record with every field of Record and of its Spec set, recursively.
func fullRecord(t *testing.T) fsm.Record {
	t.Helper()
	var r fsm.Record
	n := 0
	fillAll(t, reflect.ValueOf(&r).Elem(), &n)
	r.DisabledAt = time.Unix(0, 1_700_000_000_123_456_789).UTC()
	r.RegisteredAt = time.Unix(0, 1_600_000_000_000_000_001).UTC()
	r.DrainStartedAt = time.Unix(0, 1_750_000_000_000_000_002).UTC()
	return r
}

// fillAll sets every field reachable from v to a distinct non-zero value; it fails on a kind it
// does not know, so that a new field cannot slip through the round trips below unset.
func fillAll(t *testing.T, v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("v%d", *n))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillAll(t, p.Elem(), n)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fillAll(t, s.Index(0), n)
		fillAll(t, s.Index(1), n)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillAll(t, k, n)
		fillAll(t, e, n)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return // set by the caller
		}
		for i := range v.NumField() {
			fillAll(t, v.Field(i), n)
		}
	default:
		t.Fatalf("fillAll: %s is a %s; teach fillAll and convert.go about it", v.Type(), v.Kind())
	}
}

// TestForwardResultRoundTrip sends Results through the answer's wire form and back: what a
// follower's caller gets must equal what the leader's apply returned.
func TestForwardResultRoundTrip(t *testing.T) {
	full := fullRecord(t)
	tests := []struct {
		name string
		res  fsm.Result
	}{
		{"created with every field", fsm.Result{Index: 7, Outcome: fsm.Created, Record: &full}},
		{"unchanged", fsm.Result{Index: 8, Outcome: fsm.Unchanged, Record: &full}},
		{"updated", fsm.Result{Index: 9, Outcome: fsm.Updated, Record: &full}},
		{"removed", fsm.Result{Index: 10, Outcome: fsm.Removed, Record: &full}},
		{"ignored", fsm.Result{Index: 11, Outcome: fsm.Ignored}},
		{"created without record", fsm.Result{Index: 12, Outcome: fsm.Created}},
		{"empty spec", fsm.Result{Index: 13, Outcome: fsm.Created, Record: &fsm.Record{ID: "w-1", Owner: "n1", Epoch: 13, Revision: 13}}},
		{"not found", fsm.Result{Index: 14, Outcome: fsm.Rejected, Err: &fsm.NotFoundError{ID: "w-2"}}},
		{"weight update not open", fsm.Result{Index: 15, Outcome: fsm.Rejected, Err: &fsm.NotFoundError{Journal: "u-7"}}},
		{"conflict", fsm.Result{Index: 15, Outcome: fsm.Rejected, Record: &full, Err: &fsm.ConflictError{ID: full.ID, Reason: "revision 3, not 2"}}},
		{"conflict without id", fsm.Result{Index: 16, Outcome: fsm.Rejected, Err: &fsm.ConflictError{Reason: "cluster id is already set"}}},
		{"invalid", fsm.Result{Index: 17, Outcome: fsm.Rejected, Err: &fsm.InvalidError{Field: "owner", Msg: "empty"}}},
		{"handoff", fsm.Result{Index: 18, Outcome: fsm.Updated, Reassign: &fsm.ReassignResult{Moved: []worker.ID{"w-1", "w-2"},
			Skipped: []fsm.ReassignSkip{{ID: "w-3", Reason: "n3 is draining"}}}}},
		{"handoff that moved nothing", fsm.Result{Index: 19, Outcome: fsm.Unchanged, Reassign: &fsm.ReassignResult{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := proto.Marshal(resultToWire(tt.res))
			if err != nil {
				t.Fatal(err)
			}
			var a consensusv1.ApplyResponse
			if err := proto.Unmarshal(data, &a); err != nil {
				t.Fatal(err)
			}
			got, err := resultFromWire(&a)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.res, got); diff != "" {
				t.Fatalf("result changed on the wire (-leader +caller):\n%s", diff)
			}
		})
	}
}

func TestForwardResultFromNewerLeader(t *testing.T) {
	tests := []*consensusv1.ApplyResponse{
		{Status: consensusv1.ApplyStatus_APPLY_STATUS_APPLIED, Index: 3, Outcome: 99},
		{Status: consensusv1.ApplyStatus_APPLY_STATUS_APPLIED, Index: 3, Outcome: consensusv1.ApplyOutcome_APPLY_OUTCOME_REJECTED,
			Error: &consensusv1.BusinessError{Kind: 99, Message: "new kind"}},
	}
	for _, a := range tests {
		if _, err := resultFromWire(a); !errors.Is(err, consensus.ErrOutcomeUnknown) {
			t.Errorf("%v: %v; want consensus.ErrOutcomeUnknown", a, err)
		}
	}
}

// TestForwardRecordMatchesSnapshot: the record a leader answers is encoded exactly as its
// snapshot encodes it, and reads back as the applied record.
func TestForwardRecordMatchesSnapshot(t *testing.T) {
	full := fullRecord(t)
	f := fsm.New(testkit.Quiet())
	apply := func(index uint64, c fsm.Command) {
		data, err := fsm.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if res := f.Apply(&raft.Log{Index: index, Data: data}).(fsm.Result); res.Err != nil {
			t.Fatalf("apply %T: %v", c, res.Err)
		}
	}
	apply(1, fsm.Register{ID: full.ID, Spec: full.Spec, Owner: full.Owner, At: full.RegisteredAt})
	apply(2, fsm.SetFlags{ID: full.ID, Flags: fsm.FlagChange{Disabled: ptr(true), Reason: "r", By: "ops", At: full.DisabledAt, IsDead: ptr(true)}})
	rec, ok := f.Worker(full.ID)
	if !ok {
		t.Fatal("no record")
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var s snapshotSink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	var msg consensusv1.Snapshot
	if err := proto.Unmarshal(s.Bytes()[1:], &msg); err != nil { // after the format byte
		t.Fatal(err)
	}
	if len(msg.Workers) != 1 {
		t.Fatalf("snapshot holds %d records", len(msg.Workers))
	}
	if got := fsm.RecordToProto(&rec); !proto.Equal(msg.Workers[0], got) {
		t.Fatalf("forwarding encodes the record as\n%v\nthe snapshot as\n%v", got, msg.Workers[0])
	}
	if diff := cmp.Diff(rec, *fsm.RecordFromProto(msg.Workers[0])); diff != "" {
		t.Fatalf("the snapshot's record read back by forwarding (-applied +read):\n%s", diff)
	}
}

// snapshotSink is an in-memory raft.SnapshotSink.
type snapshotSink struct{ bytes.Buffer }

func (*snapshotSink) ID() string    { return "test" }
func (*snapshotSink) Cancel() error { return nil }
func (*snapshotSink) Close() error  { return nil }
