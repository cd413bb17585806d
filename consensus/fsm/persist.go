package fsm

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/worker"
)

// The FSM's applied state on disk (fail-static restarts, DESIGN.md section 3): each record under
// its id, and a meta entry with the cluster id, the applied index and the journal (the snapshot
// message without workers). A gateway loads it before raft starts and serves it at once, before
// any leader exists; raft's replay then skips what the saved state already applied.

// Saved is one save of the applied state, read under one lock: the delta to store, the version
// it leads to (the next save asks what changed since it) and the applied index it holds.
type Saved struct {
	Delta   storage.FSMDelta
	Version uint64
	Applied uint64
}

// SaveSince returns what changed after version v as a storage delta: the records changed since,
// or every record (Full) when the change log cannot name them (v is 0, too old, or a restore
// or the cluster init happened since). Records and meta are read with the applied index and
// the version under one lock, so the delta is the state at exactly that index.
func (f *FSM) SaveSince(v uint64) (Saved, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := Saved{Version: f.version.Load(), Applied: f.st.applied}
	ids, ok := f.changes.since(v, s.Version)
	if v == 0 || !ok {
		s.Delta.Full = true
		ids = slices.Collect(maps.Keys(f.st.workers))
	}
	for _, id := range ids {
		r, found := f.st.workers[id]
		if !found {
			s.Delta.Dels = append(s.Delta.Dels, []byte(id))
			continue
		}
		raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(recordToProto(r))
		if err != nil {
			return Saved{}, fmt.Errorf("encode record %s: %w", id, err)
		}
		s.Delta.Puts = append(s.Delta.Puts, storage.KV{Key: []byte(id), Value: raw})
	}
	meta := &consensusv1.Snapshot{ClusterId: f.st.clusterID, AppliedIndex: f.st.applied}
	for _, j := range f.st.journal {
		meta.Journal = append(meta.Journal, journalToProto(j))
	}
	meta.Draining = drainingToProto(f.st.draining)
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(meta)
	if err != nil {
		return Saved{}, fmt.Errorf("encode the applied state: %w", err)
	}
	s.Delta.Meta = append([]byte{snapshotFormat}, raw...)
	return s, nil
}

// Loader reads a saved state; *storage.Store implements it.
type Loader interface {
	LoadFSM(each func(key, value []byte) error) (meta []byte, err error)
}

// Load replaces the state with the one saved in l, before raft starts, and returns its applied
// index (0 and false when nothing was saved). Entries at or below that index are then skipped
// when raft replays them.
func (f *FSM) Load(l Loader) (uint64, bool, error) {
	st := newState()
	meta, err := l.LoadFSM(func(key, value []byte) error {
		var p consensusv1.WorkerRecord
		if err := proto.Unmarshal(value, &p); err != nil {
			return fmt.Errorf("decode the saved record %q: %w", key, err)
		}
		r := recordFromProto(&p)
		if string(r.ID) != string(key) {
			return fmt.Errorf("the saved record under %q names worker %q", key, r.ID)
		}
		st.workers[worker.ID(string(key))] = r
		return nil
	})
	if err != nil || meta == nil {
		return 0, false, err
	}
	if len(meta) == 0 || meta[0] != snapshotFormat {
		return 0, false, fmt.Errorf("the saved state has an unknown format (%d bytes)", len(meta))
	}
	var m consensusv1.Snapshot
	if err := proto.Unmarshal(meta[1:], &m); err != nil {
		return 0, false, fmt.Errorf("decode the saved state: %w", err)
	}
	st.clusterID, st.applied, st.draining = m.ClusterId, m.AppliedIndex, drainingFromProto(m.Draining)
	for _, p := range m.Journal {
		st.journal = append(st.journal, journalFromProto(p))
	}
	f.mu.Lock()
	f.st = st
	f.changes.add(f.version.Add(1), nil, nil) // a reset: readers read every record again
	f.mu.Unlock()
	f.notify()
	f.signalApplied()
	f.log.Info("loaded the applied state saved before the restart", "applied_index", st.applied, "workers", len(st.workers))
	return st.applied, true, nil
}
