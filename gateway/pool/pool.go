// Package pool holds the workers a gateway knows and the routable view the data plane reads
// lock-free: a copy-on-write Snapshot swapped atomically, rebuilt only when a gate really flips.
package pool

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// ErrNotFound is returned for an id the pool does not hold.
var ErrNotFound = errors.New("worker not found")

// Config configures a Pool. The zero value works.
type Config struct {
	// NewTransport attaches a transport to each new Worker (nil: none). It is called with the
	// pool's lock held and must not call back into the pool.
	NewTransport func(*Worker) Transport
	// OnChange is called after every snapshot swap (nil: nothing). Read Snapshot from it; calls
	// may arrive concurrently, and the latest snapshot is always the one to use.
	OnChange func()
	// StartPending makes a newly added worker start health.Pending, for a gateway whose owners
	// check health (their verdicts then move it). False, the zero value, starts it health.Ready:
	// nothing checks health, so every registered worker takes traffic.
	StartPending bool
}

// initialHealth is the health state of a newly added worker.
func (c *Config) initialHealth() health.State {
	if c.StartPending {
		return health.Pending
	}
	return health.Ready
}

// Pool is the set of workers this gateway knows. Mutations take a lock; reads go through the
// atomically swapped Snapshot.
type Pool struct {
	cfg Config
	// mu guards the fields below; Get reads workers under its read lock.
	mu      sync.RWMutex
	workers map[worker.ID]*Worker
	snap    atomic.Pointer[Snapshot]
	version uint64
	held    atomic.Int32 // open Defers; the snapshot is not rebuilt while > 0
	dirty   bool         // a rebuild was held back; guarded by mu
	// reshaped names the workers added, removed or replaced since the last rebuild, whose
	// places in All the next rebuild updates (empty: it reuses All); flipped names those whose
	// gates flipped, whose places in Routable it updates. Guarded by mu.
	reshaped, flipped map[worker.ID]struct{}
	// holds are the running hung holds (HoldHung) and holdN numbers them. Guarded by mu.
	holds map[worker.ID]hungHold
	holdN uint64
}

// New returns an empty pool.
func New(cfg Config) *Pool {
	p := &Pool{cfg: cfg, workers: make(map[worker.ID]*Worker),
		reshaped: make(map[worker.ID]struct{}), flipped: make(map[worker.ID]struct{})}
	p.snap.Store(&Snapshot{pool: p})
	return p
}

// Attach gives a pool built without them its transport factory and change hook (Config's
// NewTransport and OnChange), for a data plane built after the pool it serves (gateway.New).
// Call it once, before the pool is shared: it fails when the pool already has either hook or
// holds a worker, whose transport would be missing.
func (p *Pool) Attach(newTransport func(*Worker) Transport, onChange func()) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.NewTransport != nil || p.cfg.OnChange != nil || len(p.workers) > 0 {
		return errors.New("pool: Attach on a pool that has hooks or workers already")
	}
	p.cfg.NewTransport, p.cfg.OnChange = newTransport, onChange
	return nil
}

// Snapshot returns the current view. It never returns nil and must not be modified.
func (p *Pool) Snapshot() *Snapshot { return p.snap.Load() }

// Get returns the worker with id, or nil: the pool's current one, inside a Defer too (the
// workers added since are found before a snapshot shows them).
func (p *Pool) Get(id worker.ID) *Worker {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.workers[id]
}

// Defer holds back snapshot rebuilds until the returned flush is called, which rebuilds once if
// anything changed meanwhile: a reconcile pass over 100,000 records then costs one rebuild, not
// one per record (which is quadratic). Until the flush, Snapshot is the view from before Defer
// (the data plane keeps routing on it) and OnChange is not called; the mutations themselves
// take effect in the pool at once, and Get sees them. Defers may nest; call each flush once.
func (p *Pool) Defer() (flush func()) {
	p.held.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			published := p.held.Add(-1) == 0 && p.dirty && p.rebuildLocked()
			p.mu.Unlock()
			if published {
				p.changed()
			}
		})
	}
}

// Upsert normalizes spec and adds it, or replaces the worker with the same id when its spec
// differs (runtime state carries over). It reports whether anything changed. The error is the
// *worker.FieldError from Normalize.
func (p *Pool) Upsert(spec worker.Spec, origin string) (*Worker, bool, error) {
	return p.upsert(spec, origin, nil)
}

// UpsertFlags is Upsert that also sets the raft record's disabled and is_dead gates in the same
// snapshot swap, so that a worker its record disables is never routable, not even for the
// instant between adding it and gating it. It reports whether the spec or a gate changed.
func (p *Pool) UpsertFlags(spec worker.Spec, origin string, disabled, dead bool) (*Worker, bool, error) {
	return p.upsert(spec, origin, func(w *Worker) bool {
		flipped := w.setGate(GateDisabled, disabled)
		return w.setGate(GateDead, dead) || flipped
	})
}

// RecordFlags are the gates a raft record sets on its worker.
type RecordFlags struct {
	// Disabled is the operator's switch (GateDisabled).
	Disabled bool
	// Dead is the is_dead quarantine (GateDead).
	Dead bool
	// Draining says a DELETE was accepted and the owner removes the record after its settle
	// time (GateRemoving): no new request goes to the worker, in-flight ones finish.
	Draining bool
}

// UpsertRecord is UpsertFlags for a spec that is already normalized, as raft's records are,
// with id its ID, and with every gate of the record (flags) set in the same snapshot swap: it
// skips the normalization (URL parsing and hashing, a third of a restart's reconcile pass at
// 100,000 workers) and keeps spec without copying it. The pool never modifies a worker's spec,
// so its maps and slices may be shared with an immutable record; the caller must not modify
// them either.
func (p *Pool) UpsertRecord(id worker.ID, spec worker.Spec, origin string, flags RecordFlags) (*Worker, bool) {
	w, changed, _ := p.upsertNormalized(id, spec, origin, func(w *Worker) bool {
		flipped := w.setGate(GateDisabled, flags.Disabled)
		flipped = w.setGate(GateDead, flags.Dead) || flipped
		return w.setGate(GateRemoving, flags.Draining) || flipped
	})
	return w, changed
}

// upsert adds or replaces the worker of spec; gate, if set, adjusts its gates under the lock.
func (p *Pool) upsert(spec worker.Spec, origin string, gate func(*Worker) bool) (*Worker, bool, error) {
	spec = spec.Clone()
	if err := spec.Normalize(); err != nil {
		return nil, false, err
	}
	return p.upsertNormalized(spec.ID(), spec, origin, gate)
}

// upsertNormalized is upsert of a normalized spec that the pool may keep as it is.
func (p *Pool) upsertNormalized(id worker.ID, spec worker.Spec, origin string, gate func(*Worker) bool) (*Worker, bool, error) {
	p.mu.Lock()
	old := p.workers[id]
	if old != nil && old.Origin == origin && reflect.DeepEqual(old.spec, spec) {
		if gate == nil || !gate(old) {
			p.mu.Unlock()
			return old, false, nil
		}
		p.flipped[id] = struct{}{}
		published := p.rebuildLocked()
		p.mu.Unlock()
		p.changedIf(published)
		return old, true, nil
	}
	w := newWorker(spec, origin)
	if old != nil {
		w.carryState(old)
		closeTransport(old)
	} else {
		w.setHealth(p.cfg.initialHealth())
	}
	if gate != nil {
		gate(w)
	}
	if p.cfg.NewTransport != nil {
		w.transport = p.cfg.NewTransport(w)
	}
	p.workers[id] = w
	p.reshaped[id] = struct{}{}
	published := p.rebuildLocked()
	p.mu.Unlock()
	p.changedIf(published)
	return w, true, nil
}

// Remove drops the worker with id and closes its transport.
func (p *Pool) Remove(id worker.ID) error {
	p.mu.Lock()
	w := p.workers[id]
	if w == nil {
		p.mu.Unlock()
		return ErrNotFound
	}
	delete(p.workers, id)
	p.reshaped[id] = struct{}{}
	p.endHoldLocked(w)
	closeTransport(w)
	published := p.rebuildLocked()
	p.mu.Unlock()
	p.changedIf(published)
	return nil
}

// SetHealth records the worker's health state and reports whether its routability changed. A
// change of state ends a hung hold (HoldHung): the owner's verdict decides again.
func (p *Pool) SetHealth(id worker.ID, h health.State) (bool, error) {
	return p.mutate(id, func(w *Worker) bool {
		released := false
		if w.Health() != h {
			released = p.endHoldLocked(w)
		}
		return w.setHealth(h) || released
	})
}

// SetFlags records the raft record's disabled and is_dead flags and reports whether the worker's
// routability changed.
func (p *Pool) SetFlags(id worker.ID, disabled, dead bool) (bool, error) {
	return p.mutate(id, func(w *Worker) bool {
		flipped := w.setGate(GateDisabled, disabled)
		return w.setGate(GateDead, dead) || flipped
	})
}

// mutate applies f to the worker under the lock and rebuilds the snapshot when f reports that a
// gate flipped, so events, metrics and readiness fire only on a real change.
func (p *Pool) mutate(id worker.ID, f func(*Worker) bool) (bool, error) {
	p.mu.Lock()
	w := p.workers[id]
	if w == nil {
		p.mu.Unlock()
		return false, ErrNotFound
	}
	flipped := f(w)
	if flipped {
		p.flipped[id] = struct{}{}
	}
	published := flipped && p.rebuildLocked()
	p.mu.Unlock()
	p.changedIf(published)
	return flipped, nil
}

// SetBreaker attaches b (nil detaches) to the worker; selection then skips it while b.Allow()
// is false. Breaker verdicts are read per request, so no snapshot rebuild is needed.
func (p *Pool) SetBreaker(id worker.ID, b Breaker) error {
	w := p.Get(id)
	if w == nil {
		return ErrNotFound
	}
	if b == nil {
		w.breaker.Store(nil)
	} else {
		w.breaker.Store(&breakerBox{b: b})
	}
	return nil
}

// SetDiscoveredModels records the models the worker said it serves when its owner asked (nil
// forgets them). They are runtime state, kept across a spec change, and do not change routing
// (a worker that declares no model takes any), so no snapshot rebuild is needed. The lock is
// taken so that a concurrent Upsert replacing the worker carries the new value over.
func (p *Pool) SetDiscoveredModels(id worker.ID, models []string) error {
	var box *[]string
	if models != nil {
		models = slices.Clone(models)
		box = &models
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.workers[id]
	if w == nil {
		return ErrNotFound
	}
	w.discovered.Store(box)
	return nil
}

// SetOwner records the node id that owns the worker and the epoch of its record.
func (p *Pool) SetOwner(id worker.ID, owner string, epoch uint64) error {
	w := p.Get(id)
	if w == nil {
		return ErrNotFound
	}
	w.owner.Store(&ownership{owner: owner, epoch: epoch})
	return nil
}

func (w *Worker) setHealth(h health.State) bool {
	w.health.Store(uint32(h))
	flipped := w.setGate(GateNotReady, h != health.Ready && h != health.Draining)
	return w.setGate(GateDraining, h == health.Draining) || flipped
}

func closeTransport(w *Worker) {
	if w.transport != nil {
		w.transport.Close()
	}
}

func (p *Pool) changed() {
	if p.cfg.OnChange != nil {
		p.cfg.OnChange()
	}
}

func (p *Pool) changedIf(published bool) {
	if published {
		p.changed()
	}
}

// rebuildLocked swaps in a new snapshot of the workers and reports true, or, inside a Defer,
// marks one as due and reports false. A few changed workers (a registration, a disable, a
// health change) are merged into the last snapshot's sorted lists: copies of the pointer
// arrays and a binary search per change, without touching the other workers, so one change
// costs about the same at 1,000 and at 100,000 workers. Many changes at once (a reconcile pass)
// rebuild the lists from every worker.
func (p *Pool) rebuildLocked() bool {
	if p.held.Load() > 0 {
		p.dirty = true
		return false
	}
	p.dirty = false
	p.version++
	prev := p.snap.Load()
	s := &Snapshot{Version: p.version, All: prev.All, Routable: prev.Routable, External: prev.External, pool: p}
	for id := range p.reshaped {
		p.flipped[id] = struct{}{} // a new or replaced worker's place in Routable changes too
	}
	if len(p.reshaped) > 0 {
		s.All = p.mergeLocked(prev.All, p.reshaped, func(*Worker) bool { return true })
		s.External = p.externalLocked(prev.External)
	}
	if len(p.flipped) > 0 {
		s.Routable = p.mergeLocked(prev.Routable, p.flipped, func(w *Worker) bool { return w.Gates() == 0 })
		if len(p.flipped) > len(prev.All)/8+16 { // rebuilt from All
			s.Routable = s.Routable[:0:0]
			for _, w := range s.All {
				if w.Gates() == 0 {
					s.Routable = append(s.Routable, w)
				}
			}
		}
	}
	p.reshaped, p.flipped = resetSet(p.reshaped), resetSet(p.flipped)
	p.snap.Store(s)
	return true
}

// externalLocked returns prev (Snapshot.External) with the reshaped workers put in their place.
// External providers are few, so it costs the reshaped workers and the external ones, never a
// pass over the pool; it returns prev itself when nothing external changed.
func (p *Pool) externalLocked(prev []*Worker) []*Worker {
	touched := false
	for id := range p.reshaped {
		if w := p.workers[id]; w != nil && w.ConnectionMode() == worker.ModeExternal {
			touched = true
			break
		}
	}
	if !touched {
		for _, w := range prev {
			if _, ok := p.reshaped[w.ID]; ok {
				touched = true
				break
			}
		}
	}
	if !touched {
		return prev
	}
	out := make([]*Worker, 0, len(prev)+1)
	for _, w := range prev {
		if _, ok := p.reshaped[w.ID]; !ok {
			out = append(out, w)
		}
	}
	for id := range p.reshaped {
		if w := p.workers[id]; w != nil && w.ConnectionMode() == worker.ModeExternal {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b *Worker) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return out
}

// resetSet empties m, or replaces it when it grew large (a first pass's buckets are not kept).
func resetSet(m map[worker.ID]struct{}) map[worker.ID]struct{} {
	if len(m) > 1024 {
		return make(map[worker.ID]struct{})
	}
	clear(m)
	return m
}

// mergeLocked returns prev (sorted by id) with the workers named in changed put in their place:
// each id's current worker, kept when it exists and keep says so, and dropped otherwise. Many
// changes rebuild the list from every worker instead, and sort it.
func (p *Pool) mergeLocked(prev []*Worker, changed map[worker.ID]struct{}, keep func(*Worker) bool) []*Worker {
	if len(changed) > len(prev)/8+16 {
		all := make([]*Worker, 0, len(p.workers))
		for _, w := range p.workers {
			if keep(w) {
				all = append(all, w)
			}
		}
		slices.SortFunc(all, func(a, b *Worker) int { return strings.Compare(string(a.ID), string(b.ID)) })
		return all
	}
	ids := make([]worker.ID, 0, len(changed))
	for id := range changed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if p.unmovedLocked(prev, ids, keep) {
		return prev // say, a new worker that is not routable yet: Routable stays as it was
	}
	out := make([]*Worker, 0, len(prev)+len(ids))
	i := 0
	for _, id := range ids {
		j, _ := slices.BinarySearchFunc(prev[i:], id, func(w *Worker, id worker.ID) int { return strings.Compare(string(w.ID), string(id)) })
		out = append(out, prev[i:i+j]...)
		i += j
		if i < len(prev) && prev[i].ID == id {
			i++ // its old place
		}
		if w := p.workers[id]; w != nil && keep(w) {
			out = append(out, w)
		}
	}
	return append(out, prev[i:]...)
}

// unmovedLocked reports whether merging ids into prev would change nothing: each id is in prev
// as its current, kept worker, or absent from prev and not kept.
func (p *Pool) unmovedLocked(prev []*Worker, ids []worker.ID, keep func(*Worker) bool) bool {
	for _, id := range ids {
		j, found := slices.BinarySearchFunc(prev, id, func(w *Worker, id worker.ID) int { return strings.Compare(string(w.ID), string(id)) })
		w := p.workers[id]
		kept := w != nil && keep(w)
		if found != kept || found && prev[j] != w {
			return false
		}
	}
	return true
}
