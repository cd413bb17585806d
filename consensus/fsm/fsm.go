// Package fsm is the deterministic state machine raft replicates: the cluster id, the worker
// records with their owners, epochs and flags, the weight-update journal, and the commands that
// change them.
//
// A log entry is one CommandType byte followed by the command's protobuf body
// (api/consensus/v1), dispatched through a table. Apply reads no clock and draws no random
// number: times and ids come inside the commands, from the proposer. An entry that does not
// decode panics, because skipping it would let this node's state diverge; a business error
// (not found, conflict, invalid) is the Result of the entry, the same on every node.
package fsm

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/worker"
)

// state is the replicated state. Stored *Record values are never modified after they are put
// in the map (a change stores a new copy), so a snapshot can share them with later applies.
type state struct {
	clusterID string
	workers   map[worker.ID]*Record
	journal   []*JournalRecord
	applied   uint64
	// appliedTerm is the raft term of the entry at applied; 0 when the state was loaded or
	// restored rather than applied (neither keeps it).
	appliedTerm uint64
	// draining marks the peers being drained (OperatorReassign), by id. Never modified in place: a
	// change stores a new map, so a snapshot can share it.
	draining map[string]DrainingPeer

	// touched is not replicated state: the ids the apply in progress changed (put and del
	// note them), for the change log; journalChanged says it changed the journal.
	touched        []worker.ID
	journalChanged bool
}

func newState() state { return state{workers: make(map[worker.ID]*Record)} }

// FSM implements raft.FSM over the fleet's durable state. Reads are safe from any goroutine and
// return copies.
type FSM struct {
	log *slog.Logger

	mu sync.RWMutex
	st state

	// version counts state changes (applies that changed something, and restores). It is
	// written under mu, with changes, so that the two agree; Version reads it without mu.
	version atomic.Uint64
	// changes names the records each recent version changed; guarded by mu.
	changes changeLog

	watchMu  sync.Mutex
	watchers map[chan struct{}]struct{}

	// appliedSig is closed, and replaced, each time the applied index grows (AppliedSignal).
	appliedSig atomic.Pointer[chan struct{}]

	// proposed is, by node id, the index of the last entry applied that the node proposed (the
	// entry's Extensions name it); not replicated state, and empty after a restart. Guarded by
	// proposedMu.
	proposedMu sync.Mutex
	proposed   map[string]uint64
}

var _ raft.FSM = (*FSM)(nil)

// New returns an empty FSM. A nil logger means slog.Default().
func New(logger *slog.Logger) *FSM {
	if logger == nil {
		logger = slog.Default()
	}
	f := &FSM{log: logger, st: newState(), watchers: make(map[chan struct{}]struct{}), proposed: make(map[string]uint64)}
	sig := make(chan struct{})
	f.appliedSig.Store(&sig)
	return f
}

// Apply implements raft.FSM. It returns a Result, never an error: raft errors mean the entry
// did not apply, and every entry that reaches the FSM applies (possibly as a rejection).
func (f *FSM) Apply(l *raft.Log) any {
	if f.replayed(l.Index) {
		// Applied before a restart and loaded from the saved state (Load): raft replays the log
		// from its last snapshot, and applying an entry twice is not idempotent for every
		// command (a CAS would now fail, and its Result differ).
		return Result{Outcome: Ignored, Index: l.Index}
	}
	if len(l.Data) == 0 {
		panic(fmt.Sprintf("consensus/fsm: entry %d is empty", l.Index))
	}
	raw := CommandType(l.Data[0])
	t := raw &^ IgnoreUnknownFlag
	h := handlers[t]
	if h == nil && raw&IgnoreUnknownFlag == 0 {
		panic(fmt.Sprintf("consensus/fsm: entry %d has unknown command type %d", l.Index, uint8(t)))
	}
	res, changed := f.apply(h, l.Index, l.Term, l.Data[1:])
	if len(l.Extensions) > 0 {
		f.proposedMu.Lock()
		f.proposed[string(l.Extensions)] = l.Index
		f.proposedMu.Unlock()
	}
	res.Index = l.Index
	if res.Record != nil {
		c := res.Record.Clone()
		res.Record = &c
	}
	f.signalApplied()
	switch {
	case h == nil:
		f.log.Warn("skipped a command of a type this version does not know",
			"index", l.Index, "type", uint8(raw))
	case changed:
		f.notify()
	}
	if f.log.Enabled(context.Background(), slog.LevelDebug) {
		f.log.Debug("applied", "index", l.Index, "command", t, "outcome", res.Outcome, "err", res.Err)
	}
	return res
}

// apply runs h (nil: skip) under the write lock and records the applied index. When the state
// changed, it bumps the version and logs the ids the change touched under the same lock, so
// that ChangedSince sees both or neither.
func (f *FSM) apply(h handler, index, term uint64, body []byte) (res Result, changed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res = Result{Outcome: Ignored}
	f.st.touched, f.st.journalChanged = f.st.touched[:0], false
	if h != nil {
		res = h(&f.st, index, body)
	}
	f.st.applied, f.st.appliedTerm = index, term
	// A handler that touched a record or the journal changed the state whatever its outcome
	// says.
	changed = res.Outcome.Changed() || len(f.st.touched) > 0 || f.st.journalChanged
	if changed {
		f.changes.add(f.version.Add(1), f.st.touched, f.st.workers)
	}
	return res, changed
}

// replayed reports whether the entry at index is already in the state.
func (f *FSM) replayed(index uint64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return index <= f.st.applied
}

// AppliedEntry returns the index and term of the last entry applied; term is 0 when the
// state at index was loaded or restored rather than applied. An entry applied is committed, so
// a log holding an entry of that index and term holds the committed log up to it.
func (f *FSM) AppliedEntry() (index, term uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.applied, f.st.appliedTerm
}

// AppliedFor returns the index of the last entry applied that node id proposed, 0 when none
// since this FSM started.
func (f *FSM) AppliedFor(id string) uint64 {
	f.proposedMu.Lock()
	defer f.proposedMu.Unlock()
	return f.proposed[id]
}

// ClusterID returns the cluster id, "" before the first leader set it.
func (f *FSM) ClusterID() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.clusterID
}

// AppliedIndex returns the raft index of the last entry applied (or restored from a snapshot).
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.applied
}

// Worker returns a copy of the record of id.
func (f *FSM) Worker(id worker.ID) (Record, bool) {
	f.mu.RLock()
	r, ok := f.st.workers[id]
	f.mu.RUnlock()
	if !ok {
		return Record{}, false
	}
	return r.Clone(), true
}

// Workers returns copies of every record, sorted by id.
func (f *FSM) Workers() []Record {
	f.mu.RLock()
	recs := slices.Collect(maps.Values(f.st.workers))
	f.mu.RUnlock()
	slices.SortFunc(recs, func(a, b *Record) int { return cmp.Compare(a.ID, b.ID) })
	out := make([]Record, len(recs))
	for i, r := range recs {
		out[i] = r.Clone()
	}
	return out
}

// WorkersShared returns every record, in no particular order, without copying their specs:
// the maps and slices are the stored records' own, which the FSM never modifies (an update
// stores a new record). Read them; never modify them. It is Workers for a reader that passes
// over every record often (the gateway's reconciler, at 100,000 workers) and keeps their specs.
func (f *FSM) WorkersShared() []Record {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Record, 0, len(f.st.workers))
	for _, r := range f.st.workers {
		out = append(out, *r)
	}
	return out
}

// Len returns the number of worker records.
func (f *FSM) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.st.workers)
}

// Journal returns copies of the open weight-update records, oldest first.
func (f *FSM) Journal() []JournalRecord {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]JournalRecord, len(f.st.journal))
	for i, j := range f.st.journal {
		out[i] = j.Clone()
	}
	return out
}

// Version returns a number that grows with every change of the state. A consumer that read the
// state at version v and sees a larger one has something to reconcile.
func (f *FSM) Version() uint64 { return f.version.Load() }

// Watch returns a channel that receives after each change of the state, and a function that
// stops the watch. Signals coalesce in a buffer of one: a consumer that falls behind gets one
// signal for many changes and reconciles by reading the state, so a dropped signal costs
// nothing.
func (f *FSM) Watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.watchMu.Lock()
	f.watchers[ch] = struct{}{}
	f.watchMu.Unlock()
	return ch, func() {
		f.watchMu.Lock()
		delete(f.watchers, ch)
		f.watchMu.Unlock()
	}
}

// AppliedSignal returns a channel closed the next time the applied index changes: after every
// entry applied, whether it changed the state or not (Watch signals only changes), and after a
// restore. Read it before AppliedIndex, then wait on it, and no entry slips between.
func (f *FSM) AppliedSignal() <-chan struct{} { return *f.appliedSig.Load() }

// signalApplied wakes the AppliedSignal waiters; it runs after the applied index is visible.
func (f *FSM) signalApplied() {
	next := make(chan struct{})
	close(*f.appliedSig.Swap(&next))
}

// notify signals every watcher without blocking. It runs after the change it signals is
// visible (the version bumped and the lock released), so that a watcher reads it.
func (f *FSM) notify() {
	f.watchMu.Lock()
	defer f.watchMu.Unlock()
	for ch := range f.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Snapshot implements raft.FSM. It copies the map of (immutable) records under the lock;
// Persist encodes them while later entries apply.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &snapshot{
		clusterID: f.st.clusterID,
		applied:   f.st.applied,
		workers:   slices.Collect(maps.Values(f.st.workers)),
		journal:   slices.Clone(f.st.journal),
		draining:  f.st.draining,
	}, nil
}

// Restore implements raft.FSM: it replaces the whole state with the snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := readSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.st = st
	f.changes.add(f.version.Add(1), nil, nil) // a reset: readers read every record again
	f.mu.Unlock()
	f.notify()
	f.signalApplied()
	f.log.Info("restored state from a snapshot", "applied_index", st.applied, "workers", len(st.workers))
	return nil
}
