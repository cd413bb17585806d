package consensus

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/storage"
)

// saveRetry is the wait before a failed save of the applied state is tried again.
const saveRetry = time.Second

// fsmSaver is what the saver writes to; *storage.Store implements it.
type fsmSaver interface {
	SaveFSM(d storage.FSMDelta) error
}

// saver keeps the FSM's applied state on disk (fsm.SaveSince, storage.Store.SaveFSM) so that a
// restart serves it at once (fail-static). It follows the FSM's Watch: each save writes, in
// one bbolt transaction, what changed since the last one, so saves coalesce under a burst of
// writes and cost one fsync each.
type saver struct {
	fsm   *fsm.FSM
	store fsmSaver
	log   *slog.Logger

	version      uint64                        // the FSM version the last save holds; owned by the loop
	savedVersion atomic.Uint64                 // version, for readers
	saved        atomic.Uint64                 // the applied index the last save holds
	savedSig     atomic.Pointer[chan struct{}] // closed and replaced after each save

	stop chan struct{}
	done chan struct{}
}

// newSaver returns a saver whose state on disk is at version (0: nothing saved yet, the first
// save writes every record) and applied index.
func newSaver(f *fsm.FSM, store fsmSaver, version, applied uint64, log *slog.Logger) *saver {
	s := &saver{fsm: f, store: store, log: log, version: version, stop: make(chan struct{}), done: make(chan struct{})}
	s.saved.Store(applied)
	s.savedVersion.Store(version)
	sig := make(chan struct{})
	s.savedSig.Store(&sig)
	return s
}

// run saves after each change of the FSM until close, then once more.
func (s *saver) run() {
	defer close(s.done)
	ch, cancel := s.fsm.Watch()
	defer cancel()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-s.stop:
			s.save()
			return
		case <-ch:
		case <-retry.C:
		}
		if !s.save() {
			retry.Reset(saveRetry)
		}
	}
}

// save writes what changed since the last save, and reports whether the state on disk is
// current (a failure is logged and tried again).
func (s *saver) save() bool {
	if s.fsm.Version() == s.version {
		return true
	}
	sv, err := s.fsm.SaveSince(s.version)
	if err == nil {
		err = s.store.SaveFSM(sv.Delta)
	}
	if err != nil {
		s.log.Error("saving the applied state failed; a restart would serve an older state until raft replays its log", "err", err)
		return false
	}
	s.version = sv.Version
	s.saved.Store(sv.Applied)
	s.savedVersion.Store(sv.Version)
	next := make(chan struct{})
	close(*s.savedSig.Swap(&next))
	if sv.Delta.Full && len(sv.Delta.Puts) > 1000 {
		s.log.Info("saved the whole applied state", "workers", len(sv.Delta.Puts), "applied_index", sv.Applied)
	}
	return true
}

// SavedIndex is the applied index up to which the state on disk is current: the last save's,
// or the FSM's applied index when nothing changed the state since that save (the entries
// applied since changed nothing, so a restart serves the same records).
func (s *saver) SavedIndex() uint64 {
	applied := s.fsm.AppliedIndex() // before the version: an apply in between makes them differ
	if s.fsm.Version() == s.savedVersion.Load() {
		return max(applied, s.saved.Load())
	}
	return s.saved.Load()
}

// waitSaved returns the saved index once it reaches index, or when ctx ends.
func (s *saver) waitSaved(ctx context.Context, index uint64) uint64 {
	tick := time.NewTicker(time.Millisecond) // an entry that changes nothing brings no save
	defer tick.Stop()
	for {
		sig := *s.savedSig.Load()
		if got := s.SavedIndex(); got >= index {
			return got
		}
		select {
		case <-ctx.Done():
			return s.SavedIndex()
		case <-sig:
		case <-tick.C:
		}
	}
}

func (s *saver) start() { go s.run() }

// close saves what is left and stops.
func (s *saver) close() {
	close(s.stop)
	<-s.done
}
