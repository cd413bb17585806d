// Package fleet keeps this gateway's worker pool, and the health checks of the workers it owns,
// in step with the worker records raft has applied and with the bulletins of the workers' owners
// (Importer, Publisher), and writes to those records for the admin API, the command line and
// health's removals.
package fleet

import (
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/worker"
)

// Records is the applied raft state the reconciler follows; *consensus.Node implements it.
type Records interface {
	// WorkersShared returns every applied record; the specs' maps and slices are shared with
	// the stored records and are never modified.
	WorkersShared() []fsm.Record
	// ChangedSince returns the records changed after version v, read at one version (Now),
	// or ok=false when they cannot be named (see fsm.FSM.ChangedSince); Now is set either way.
	ChangedSince(v uint64) (ch fsm.Changes, ok bool)
	// Watch signals, coalesced, after changes of the applied state.
	Watch() (<-chan struct{}, func())
}

// Owner runs the health checks and the circuit breaker of the workers this gateway owns;
// gateway/owned.Manager implements it.
type Owner interface {
	// Own starts, or updates in place, the checks of a worker this gateway owns; dead (the
	// is_dead quarantine) means the probes skip it.
	Own(spec worker.Spec, epoch uint64, dead bool)
	// Drain owns a worker whose record is draining, as Own does, and removes it (fenced by
	// epoch) once settle has passed since the drain started; the first deadline holds.
	Drain(spec worker.Spec, epoch uint64, dead bool, since time.Time, settle time.Duration)
	// Disown stops them (the record is gone or owned elsewhere). It does not touch the pool.
	Disown(id worker.ID)
}

// Config configures a Reconciler.
type Config struct {
	// NodeID is this gateway's node id: records it owns are Own'ed and have origin "local",
	// the others origin "mesh". Required.
	NodeID string
	// Records is the applied state to follow. Required.
	Records Records
	// Pool is the data plane's worker pool. Required.
	Pool *pool.Pool
	// Owner runs health checks of owned workers. Nil means no health checks: the pool's
	// initial health (ready) stands.
	Owner Owner
	// CaughtUp is closed once the applied state is current: on a restart, raft replays the log
	// after the election, and the states it passes through are history (a worker registered but
	// not yet disabled) that must not reach the pool. Until CaughtUp closes, only Start's first
	// pass runs (the state raft restored from its snapshot, complete at its index: fail-static);
	// the signals in between are held and answered by one pass when it closes, save that the
	// checks of an owned worker whose applied record names another owner, or is gone, stop at
	// once (fence.go). main closes it when this node's leader loop starts (after raft's
	// Barrier); followers (the cluster step) will close it once they have applied the leader's
	// commit index. Nil means every applied state is current.
	CaughtUp <-chan struct{}
	// Imports is the importer of other owners' bulletins: bulletins held for records not yet
	// applied are judged again after each pass, and what was imported of a worker whose record
	// is gone is forgotten. Nil: no bulletins are imported.
	Imports *Importer
	// AppliedIndex reads the raft index of the last entry Records applied; the reconciler reads
	// it before each pass, so that once the pass is published the pool reflects the log up to
	// it (AppliedIndex, WaitApplied: fleet-acknowledged writes). Nil: WaitApplied never reaches
	// an index above 0.
	AppliedIndex func() uint64
	// AppliedSignal returns a channel closed the next time the index AppliedIndex reads grows,
	// by any entry, one that changes no record included. WaitApplied waits on it; nil: it
	// looks again every appliedPoll.
	AppliedSignal func() <-chan struct{}
	// Logger receives one line per change applied to the pool. Nil means slog.Default().
	Logger *slog.Logger
}

// Reconciler applies the raft records to the pool: on every Watch signal (coalesced) and once at
// Start, it changes only what differs from what it applied last. The first pass, the one when
// CaughtUp closes, and any pass the FSM cannot tell what changed for (a restored snapshot, or
// more changes than it logs) read every record: a full pass, O(records). The others read only
// the records changed since the version the last pass applied: an incremental pass, O(changes).
// Both are idempotent, so a dropped or merged signal costs nothing.
type Reconciler struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex // serializes passes; guards the fields below
	seen   map[worker.ID]applied
	passes int
	// pass collects the per-worker lines of the running pass (passlog.go); each pass makes
	// its own, before anything logs into it.
	pass *passLog
	// version is the records' version the last pass applied; the next one asks what changed
	// since.
	version uint64
	// needFull says the next pass must read every record: before the first pass, and after a
	// pass that panicked.
	needFull bool
	// fenced is the records' version the last fence read, while CaughtUp has not closed.
	fenced uint64

	// poolIndex is what the pool has applied and published; see applied.go.
	poolIndex poolIndex

	// current is set once CaughtUp closed (or when there is none): WaitApplied may then run a
	// pass itself.
	current atomic.Bool

	started  atomic.Bool
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// applied is what the reconciler last applied for one record. It holds no spec: the pool's
// worker has it, and a gateway importing 100,000 workers keeps one copy less.
type applied struct {
	revision uint64
	owner    string
	epoch    uint64
	disabled bool
	dead     bool
	draining bool
	owned    bool // Own (or Drain) was called and Disown not since
}

// New returns a Reconciler; Start runs it.
func New(cfg Config) *Reconciler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Reconciler{
		cfg:       cfg,
		log:       cfg.Logger.With("component", "fleet"),
		seen:      make(map[worker.ID]applied),
		needFull:  true,
		poolIndex: newPoolIndex(),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	r.current.Store(cfg.CaughtUp == nil)
	return r
}

// Start subscribes to the records, reconciles once (the state recovered so far) and keeps
// reconciling in a background goroutine until Stop.
func (r *Reconciler) Start() {
	if r.started.Swap(true) {
		return
	}
	ch, cancel := r.cfg.Records.Watch() // before the first pass, so no change slips between
	r.Reconcile()
	go r.loop(ch, cancel)
}

// Stop ends the background loop and waits for it. The pool and the owned workers are left as
// they are. Stop before Start, or twice, is harmless.
func (r *Reconciler) Stop() {
	r.stopOnce.Do(func() { close(r.stop) })
	if r.started.Load() {
		<-r.done
	}
}

func (r *Reconciler) loop(ch <-chan struct{}, cancel func()) {
	defer close(r.done)
	defer cancel()
	caughtUp, held := r.cfg.CaughtUp, false
	for {
		select {
		case <-r.stop:
			return
		case <-caughtUp:
			caughtUp = nil // a nil channel never fires again
			r.current.Store(true)
			r.log.Info("raft state is current; following it", "held_changes", held)
			r.reconcile(true)
		case <-ch:
			if caughtUp != nil {
				held = true
				r.fence() // the held state reaches no pass, but checks this gateway lost stop now
				continue
			}
			r.Reconcile()
		}
	}
}

// Reconcile runs one pass: each record changed since the last pass (every record, in a full
// pass) is applied to the pool (and to the Owner when this gateway owns it), and workers whose
// record is gone are removed. The pool publishes the pass as one snapshot (pool.Defer), so a
// pass over 100,000 records rebuilds the routable view once. The first pass (the state restored
// at start) logs one summary line and each worker at debug level; later passes log each change,
// or, for more than bulkLines changes, one summary line (passlog.go).
// It recovers and logs a panic, so a bad pass never stops the loop.
func (r *Reconciler) Reconcile() { r.reconcile(false) }

// reconcile runs one pass, a full one when full is set or an incremental one cannot be run.
func (r *Reconciler) reconcile(full bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			r.needFull = true // what the pass applied is unknown: read everything next time
			r.log.Error("panic in a reconcile pass", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	r.pass = newPassLog(r.log)
	defer r.pass.flush()
	// The FSM reads the changed ids, their records and the version under one lock: the records
	// are the state at exactly ch.Now. A change that applies after that read gets a version
	// above ch.Now, and its Watch signal is sent once it is visible, so the next pass asks for
	// the changes since ch.Now and gets it: nothing is lost, and nothing is applied twice but
	// idempotently.
	index := r.appliedIndex() // before the records: every entry up to it is in them
	ch, ok := r.cfg.Records.ChangedSince(r.version)
	switch {
	case full || !ok || r.needFull:
		// Only ch.Now is used: the changes a forced full pass was also given (at most what the
		// FSM logs) are read again with every record.
		r.fullPass()
	case ch.Now == r.version:
		r.poolIndex.advance(index) // nothing changed: the pool already shows the log up to index
		return
	default:
		r.incrementalPass(ch)
	}
	// Only a pass that finished gets here (a panic skips it), so version is what was applied,
	// and the pool has published it (the passes flush before they return).
	r.version, r.needFull = ch.Now, false
	r.poolIndex.advance(index)
	if r.cfg.Imports != nil {
		r.cfg.Imports.Recheck()
	}
}

// incrementalPass applies the records ch names, and drops the workers whose record ch says is
// gone. The sweep of pool workers without a record is the full pass's.
func (r *Reconciler) incrementalPass(ch fsm.Changes) {
	flush := r.cfg.Pool.Defer()
	defer flush()
	r.passes++
	for i := range ch.Workers {
		r.apply(&ch.Workers[i], false)
	}
	for _, id := range ch.Removed {
		r.drop(id, r.seen[id])
	}
}

// fullPass applies every record and drops every worker without one. The caller read the
// version (ch.Now) before the records here: a change that lands between the two reads is in
// these records and also after that version, so the next pass applies it again, which is
// idempotent. (The version read after the records would mark such a change as applied when
// it was not.)
func (r *Reconciler) fullPass() {
	flush := r.cfg.Pool.Defer()
	defer flush()
	first := r.passes == 0
	r.passes++
	start := time.Now()
	recs := r.cfg.Records.WorkersShared()
	live := make(map[worker.ID]struct{}, len(recs))
	var local, disabled int
	for i := range recs {
		rec := &recs[i]
		live[rec.ID] = struct{}{}
		r.apply(rec, first)
		if rec.Owner == r.cfg.NodeID {
			local++
		}
		if rec.Disabled || rec.IsDead {
			disabled++
		}
	}
	for id, a := range r.seen {
		if _, ok := live[id]; !ok {
			r.drop(id, a)
		}
	}
	// Workers the pool holds without a record (added before the records were read) go too.
	for _, w := range r.cfg.Pool.Snapshot().All {
		if _, ok := live[w.ID]; !ok {
			r.drop(w.ID, applied{})
		}
	}
	if first {
		r.log.Info("applied the worker records raft has restored", "workers", len(recs), "owned_here", local,
			"imported", len(recs)-local, "disabled_or_dead", disabled, "took", time.Since(start).Round(time.Millisecond))
	}
}

// apply brings the pool and the owned checks in line with one record. A host-local (ipc://)
// worker that another gateway owns is not imported: only its own host can reach it.
func (r *Reconciler) apply(rec *fsm.Record, quiet bool) {
	prev, known := r.seen[rec.ID]
	cur := r.cfg.Pool.Get(rec.ID)
	inPool := cur != nil
	mine := rec.Owner == r.cfg.NodeID
	if !mine && rec.Spec.HostLocal() {
		if known || inPool {
			r.drop(rec.ID, prev)
		}
		return
	}
	if known && inPool && prev.revision == rec.Revision && prev.owner == rec.Owner && prev.epoch == rec.Epoch &&
		prev.owned == (mine && r.cfg.Owner != nil) {
		return
	}
	specChanged := !known || !inPool || !cur.SameSpec(rec.Spec) // before the upsert replaces cur
	origin := pool.OriginMesh
	if mine {
		origin = pool.OriginLocal
	}
	// The FSM normalized the spec when it applied the registration, and never modifies a stored
	// record: the pool keeps the spec as it is, sharing its maps (and never modifying them).
	r.cfg.Pool.UpsertRecord(rec.ID, rec.Spec, origin, pool.RecordFlags{Disabled: rec.Disabled, Dead: rec.IsDead, Draining: rec.Draining})
	_ = r.cfg.Pool.SetOwner(rec.ID, rec.Owner, rec.Epoch)
	next := applied{
		revision: rec.Revision, owner: rec.Owner, epoch: rec.Epoch,
		disabled: rec.Disabled, dead: rec.IsDead, draining: rec.Draining,
	}
	switch {
	case r.cfg.Owner == nil:
	case mine:
		stale := !prev.owned || specChanged || prev.epoch != rec.Epoch || prev.dead != rec.IsDead || !inPool
		switch {
		case rec.Draining && (stale || !prev.draining):
			// The owner finishes the drain the record holds: after a DELETE taken by any
			// gateway, a restart, or a failover that made this gateway the owner.
			r.cfg.Owner.Drain(rec.Spec.Clone(), rec.Epoch, rec.IsDead, rec.DrainStartedAt, rec.DrainSettle)
		case !rec.Draining && stale:
			r.cfg.Owner.Own(rec.Spec.Clone(), rec.Epoch, rec.IsDead)
		}
		next.owned = true
	case prev.owned:
		r.cfg.Owner.Disown(rec.ID)
	}
	r.seen[rec.ID] = next
	r.logChange(rec, prev, known, specChanged, quiet)
}

// logChange logs what changed for one record into the pass's log: at debug level when quiet
// (the first pass, which logs its own summary), else as passLog decides.
func (r *Reconciler) logChange(rec *fsm.Record, prev applied, known, specChanged, quiet bool) {
	id := string(rec.ID)
	switch {
	case quiet:
		r.log.Debug("worker added", "record", rec)
	case !known:
		r.pass.add("added", id, "worker added", "record", rec)
	case prev.draining != rec.Draining:
		r.pass.add("draining", id, "worker draining: it takes no new requests, and its owner removes it once the settle time has passed",
			"record", rec, "deadline", rec.DrainDeadline(), "owner", rec.Owner)
	case prev.disabled != rec.Disabled || prev.dead != rec.IsDead:
		r.pass.add("flags_changed", id, "worker flags changed", "record", rec, "reason", rec.DisabledReason, "by", rec.DisabledBy)
	case prev.owner != rec.Owner || prev.epoch != rec.Epoch:
		r.pass.add("owner_changed", id, "worker owner changed", "record", rec, "from", prev.owner)
	case specChanged:
		r.pass.add("spec_changed", id, "worker spec changed", "record", rec)
	}
}

// drop removes a worker whose record is gone, and stops its checks if this gateway ran them.
func (r *Reconciler) drop(id worker.ID, a applied) {
	if a.owned && r.cfg.Owner != nil {
		r.cfg.Owner.Disown(id)
	}
	delete(r.seen, id)
	if r.cfg.Imports != nil {
		r.cfg.Imports.Forget(id)
	}
	if r.cfg.Pool.Remove(id) == nil {
		r.pass.add("removed", string(id), "worker removed", "id", id)
	}
}
