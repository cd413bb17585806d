package consensus

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/storage"
)

// saveRetry is the wait before a failed save of the applied state is tried again.
const saveRetry = time.Second

// defaultSaveInterval is the least time between two saves of the applied state. Nothing waits
// for a save: a restart applies the committed entries the log holds past it (replay.go), so
// saves only bound that replay (a second of entries applies in milliseconds), and spacing them
// keeps their fsyncs off the writes' path. A save shares the bbolt file, so its commit holds up
// a log append that comes meanwhile: at one save per 100 ms under a stream of fleet-acknowledged
// writes, 5 to 8 % of the log appends on disk overlapped a save (traced in a 3- and a 5-gateway
// run), which put one save in the path of about one write in five.
const defaultSaveInterval = time.Second

// fsmSaver is what the saver writes to; *storage.Store implements it.
type fsmSaver interface {
	SaveFSM(d storage.FSMDelta) error
}

// saver keeps the FSM's applied state on disk (fsm.SaveSince, storage.Store.SaveFSM) so that a
// restart serves it at once (fail-static). It follows the FSM's Watch, at most once per
// interval: each save writes, in one bbolt transaction, what changed since the last one, so
// saves coalesce under a burst of writes and cost one fsync each.
type saver struct {
	fsm   *fsm.FSM
	store fsmSaver
	log   *slog.Logger
	every time.Duration

	version      uint64                        // the FSM version the last save holds; owned by the loop
	savedVersion atomic.Uint64                 // version, for readers
	saved        atomic.Uint64                 // the applied index the last save holds
	savedSig     atomic.Pointer[chan struct{}] // closed and replaced after each save

	stop chan struct{}
	done chan struct{}
}

// newSaver returns a saver whose state on disk is at version (0: nothing saved yet, the first
// save writes every record) and applied index, saving at most once per every.
func newSaver(f *fsm.FSM, store fsmSaver, version, applied uint64, every time.Duration, log *slog.Logger) *saver {
	s := &saver{fsm: f, store: store, log: log, every: every, version: version, stop: make(chan struct{}), done: make(chan struct{})}
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
	spacing := time.NewTimer(time.Hour)
	spacing.Stop()
	defer spacing.Stop()
	var last time.Time
	for {
		select {
		case <-s.stop:
			s.save()
			return
		case <-ch:
		case <-retry.C:
		}
		if wait := time.Until(last.Add(s.every)); wait > 0 {
			spacing.Reset(wait)
			select {
			case <-s.stop:
				s.save()
				return
			case <-spacing.C:
			}
		}
		last = time.Now()
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

func (s *saver) start() { go s.run() }

// close saves what is left and stops.
func (s *saver) close() {
	close(s.stop)
	<-s.done
}
