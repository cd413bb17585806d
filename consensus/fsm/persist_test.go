package fsm

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/test/testkit"
)

// memState is a Loader over one saved delta, as storage.Store keeps it.
type memState struct {
	meta []byte
	recs map[string][]byte
}

func (m *memState) save(d storage.FSMDelta) {
	if d.Full || m.recs == nil {
		m.recs = map[string][]byte{}
	}
	for _, kv := range d.Puts {
		m.recs[string(kv.Key)] = kv.Value
	}
	for _, k := range d.Dels {
		delete(m.recs, string(k))
	}
	m.meta = d.Meta
}

func (m *memState) LoadFSM(each func(key, value []byte) error) ([]byte, error) {
	for k, v := range m.recs {
		if err := each([]byte(k), v); err != nil {
			return nil, err
		}
	}
	return m.meta, nil
}

// TestDrainingSurvivesSaveAndSnapshot: a draining record, with its start and settle, comes back
// the same from the state saved beside the log (a restart) and from a snapshot (a follower that
// installs it), and so does a record that is not draining.
func TestDrainingSurvivesSaveAndSnapshot(t *testing.T) {
	f := New(testkit.Quiet())
	a, b := spec(t, "http://127.0.0.1:8001", 0), spec(t, "http://127.0.0.1:8002", 0)
	applyAt(t, f, 1, Register{Spec: a, Owner: "n1", At: t0})
	applyAt(t, f, 2, Register{Spec: b, Owner: "n2", At: t0})
	applyAt(t, f, 3, Drain{ID: a.ID(), At: t1, Settle: 7 * time.Second})
	want := viewOf(f)
	drained, _ := f.Worker(a.ID())
	if other, _ := f.Worker(b.ID()); !drained.Draining || other.Draining {
		t.Fatalf("setup: %+v", want.Workers)
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
	if diff := cmp.Diff(want, viewOf(loaded)); diff != "" {
		t.Errorf("loaded state (-want +got):\n%s", diff)
	}

	restored := New(testkit.Quiet())
	if err := restored.Restore(io.NopCloser(bytes.NewReader(persist(t, f)))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, viewOf(restored)); diff != "" {
		t.Errorf("restored state (-want +got):\n%s", diff)
	}
	if got := drained.DrainDeadline(); !got.Equal(t1.Add(7 * time.Second)) {
		t.Errorf("deadline %v, want %v", got, t1.Add(7*time.Second))
	}
}

// TestRecordsWithoutDrainFieldsLoadAsNotDraining: records saved, and snapshots written, before
// the draining state existed (no fields 12 to 14) load as records that are not draining.
func TestRecordsWithoutDrainFieldsLoadAsNotDraining(t *testing.T) {
	s := spec(t, "http://127.0.0.1:8001", 0)
	old := &consensusv1.WorkerRecord{ // every field an older version wrote
		Id: string(s.ID()), Spec: specToProto(&s), Owner: "n1", Epoch: 3, Disabled: true, DisabledReason: "r",
		DisabledBy: "ops", DisabledAtUnixNano: t0.UnixNano(), IsDead: true, RegisteredAtUnixNano: t0.UnixNano(), Revision: 4,
	}
	raw, err := proto.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	want := Record{ID: s.ID(), Spec: s, Owner: "n1", Epoch: 3, Disabled: true, DisabledReason: "r", DisabledBy: "ops",
		DisabledAt: t0, IsDead: true, RegisteredAt: t0, Revision: 4}

	meta, err := proto.Marshal(&consensusv1.Snapshot{ClusterId: "c", AppliedIndex: 4})
	if err != nil {
		t.Fatal(err)
	}
	disk := memState{meta: append([]byte{snapshotFormat}, meta...), recs: map[string][]byte{string(s.ID()): raw}}
	loaded := New(testkit.Quiet())
	if _, ok, err := loaded.Load(&disk); err != nil || !ok {
		t.Fatalf("load: %v %v", ok, err)
	}
	snap, err := proto.Marshal(&consensusv1.Snapshot{ClusterId: "c", AppliedIndex: 4, Workers: []*consensusv1.WorkerRecord{old}})
	if err != nil {
		t.Fatal(err)
	}
	restored := New(testkit.Quiet())
	if err := restored.Restore(io.NopCloser(bytes.NewReader(append([]byte{snapshotFormat}, snap...)))); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]*FSM{"saved state": loaded, "snapshot": restored} {
		got, ok := f.Worker(s.ID())
		if !ok {
			t.Fatalf("%s: no record", name)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: record (-want +got):\n%s", name, diff)
		}
		if !got.DrainDeadline().IsZero() {
			t.Errorf("%s: a record that is not draining has deadline %v", name, got.DrainDeadline())
		}
	}
}

// TestSaveSinceWritesOnlyTheChanges: a save between two bursts of writes holds exactly the
// records the burst changed, however many records the state holds and however many changed
// since the last save (a second of writes at full rate is several thousand). A save that
// rewrote every record would cost in proportion to the fleet, once a second, and slow every
// write as the fleet grows.
func TestSaveSinceWritesOnlyTheChanges(t *testing.T) {
	const burst = 6000 // more than changeLogTombstones: no bound of the change log caps a delta
	for _, held := range []int{1000, 10_000} {
		t.Run(fmt.Sprint(held, " records held"), func(t *testing.T) {
			f := New(testkit.Quiet())
			idx := uint64(0)
			register := func(i int) {
				idx++
				s := spec(t, fmt.Sprintf("http://10.%d.%d.%d:8000", i>>16&255, i>>8&255, i&255), 0)
				applyAt(t, f, idx, Register{Spec: s, Owner: "n1", At: t0})
			}
			for i := range held {
				register(i)
			}
			first, err := f.SaveSince(0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range burst {
				register(held + i)
			}
			// And a removal and a change of a record already saved.
			a, b := spec(t, "http://10.0.0.0:8000", 0), spec(t, "http://10.0.0.1:8000", 0)
			gone, flipped := a.ID(), b.ID()
			idx++
			applyAt(t, f, idx, Remove{ID: gone})
			idx++
			applyAt(t, f, idx, SetFlags{ID: flipped, Flags: FlagChange{IsDead: ptr(true)}})
			next, err := f.SaveSince(first.Version)
			if err != nil {
				t.Fatal(err)
			}
			d := next.Delta
			if d.Full || len(d.Puts) != burst+1 || len(d.Dels) != 1 {
				t.Fatalf("save after %d writes with %d records held: full %v, %d puts, %d deletes; want %d puts and 1 delete",
					burst+2, held, d.Full, len(d.Puts), len(d.Dels), burst+1)
			}
			m := &memState{}
			m.save(first.Delta)
			m.save(next.Delta)
			g := New(testkit.Quiet())
			if _, ok, err := g.Load(m); err != nil || !ok {
				t.Fatalf("load: %v, %v", ok, err)
			}
			if diff := cmp.Diff(viewOf(f), viewOf(g)); diff != "" {
				t.Errorf("the two saves loaded (-applied +loaded):\n%s", diff)
			}
		})
	}
}
