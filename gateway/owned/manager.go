package owned

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// Options configure a Manager. Nil and zero fields have the defaults given.
type Options struct {
	// Pool is the gateway's worker pool, whose health and breakers the manager sets. Required.
	Pool *pool.Pool
	// NodeID is this gateway's node id, sent to engines with each probe.
	NodeID string
	// Health holds the health-check flags; it must pass Validate (start from
	// health.DefaultConfig).
	Health health.Config
	// Breaker holds the --cb-* flags; it must pass Validate (start from breaker.DefaultConfig).
	Breaker breaker.Config
	// GRPCService is the gRPC health service checked on gRPC workers; "" (default) checks the
	// server as a whole.
	GRPCService string
	// Registerer receives the health and breaker metrics. Default: a private registry (the
	// series are kept but not exported).
	Registerer prometheus.Registerer
	// Logger receives one line per health or breaker transition. Default: slog.Default().
	Logger *slog.Logger
	// Clock is the time source of probes and breakers. Default: the real clock.
	Clock health.Clock
	// OnRemove is called when health removes an owned worker: auto-removal of a failed worker
	// (--remove-unhealthy-workers), or the end of a drain. epoch is the one given to Own; the
	// caller removes the record through raft, fenced by (owner, epoch). nil: the manager removes
	// the worker from the pool itself.
	OnRemove func(id worker.ID, epoch uint64, reason string)
	// Probers replaces the prober of a connection mode (worker.ModeHTTP, ...), for tests.
	// Default: health.HTTPProber, health.GRPCProber, health.ExternalProber, and the local check
	// of a ZMQ worker's link.
	Probers map[string]health.Prober
	// OnChange is told each change of an owned worker's runtime state that its bulletin carries:
	// a health transition, a probe that changed the last error or status, a breaker
	// transition, a change of its consecutive failures (or of its successes while half-open:
	// steady successes on a closed circuit change nothing), discovered models, and Own. It may
	// be called with a breaker's lock held and on the request path: it must only take note
	// (gateway/fleet.Publisher marks the worker and returns). Nil: nothing is told.
	OnChange func(id worker.ID)
	// OnForget is told that the manager stopped managing a worker (Disown, a removal, Close
	// aside): its bulletins end. Nil: nothing is told.
	OnForget func(id worker.ID)
	// Seed returns, for a worker this gateway starts to own, the state to start from: the last
	// bulletin it imported from the previous owner (ownership failover). The worker then starts
	// in that health state (probed at once) with its breaker as it was. Nil, or ok false: a new
	// worker starts pending with a closed breaker.
	Seed func(id worker.ID) (Seed, bool)
	// OnDisown is told, by Disown, the runtime state of a worker this gateway stops owning
	// (its record moved to another owner, or is gone), just before its breaker leaves the
	// pool's worker: the mirror image of Seed, so that this gateway keeps routing the worker
	// by that state until the new owner's first bulletin (gateway/fleet.Importer.ImportDisowned
	// attaches a read-only view of the breaker, which the manager then leaves in place). It is
	// called with Own, Drain and Disown held off: it must not call them. Nil: the worker keeps
	// its pool health and is left without a breaker.
	OnDisown func(id worker.ID, last Status)
	// Listers replaces the model lister of a connection mode, for tests. Default: GET
	// {url}/v1/models for HTTP, meshgw.engine.v1.Engine/Models for gRPC, the WELCOME of the
	// worker's link for ZMQ. External providers are never asked.
	Listers map[string]ModelLister
}

// Status is an owned worker's runtime state, as GET /workers shows it.
type Status struct {
	// Health is the health state; pending while the worker is quarantined (Dead).
	Health               health.State
	ConsecutiveFailures  int
	ConsecutiveSuccesses int
	// LastError and LastStatusCode describe the last probe if it failed; a pass clears them.
	LastError      string
	LastStatusCode int
	// LastProbe is when the last probe finished; zero before the first.
	LastProbe time.Time
	// Probed is false when health checks are off for the worker (or it is quarantined).
	Probed bool
	// Interval is the worker's probe interval (its override, else the flag); zero while not
	// checked.
	Interval time.Duration
	// Breaker is the circuit breaker's state and counts.
	Breaker breaker.Snapshot
	// Epoch is the ownership epoch given to Own.
	Epoch uint64
	// Dead is the is_dead quarantine given to Own.
	Dead bool
	// Transitions are the worker's recent health and breaker transitions, oldest first.
	Transitions []Transition
}

// Seed is the runtime state a newly owned worker starts from (Options.Seed).
type Seed struct {
	Health                            health.State
	Breaker                           breaker.State
	BreakerFailures, BreakerSuccesses int
	BreakerReopenIn                   time.Duration
}

// Manager runs the health checks and circuit breakers of the workers this gateway owns.
type Manager struct {
	opts    Options
	log     *slog.Logger
	pool    *pool.Pool
	checker *health.Checker
	grpc    *health.GRPCProber
	bmet    *breaker.Metrics
	bclock  breaker.Clock
	lists   map[string]ModelLister

	life        context.Context // canceled by Close: ends the model discoveries in flight
	stop        context.CancelFunc
	discovering sync.WaitGroup // model discoveries in flight; Add only under mu while not closed

	ops      sync.Mutex // serializes Own, Drain, Disown and Close; never taken by a callback
	healthMu sync.Mutex // serializes writes of the pool's health (syncHealth)
	mu       sync.Mutex // guards owned, closed, and each ownedWorker's spec, epoch, dead and draining
	owned    map[worker.ID]*ownedWorker
	closed   bool
}

// ownedWorker is one owned worker.
type ownedWorker struct {
	id    worker.ID
	label string // metric and log label: the URL, with @RANK for a data-parallel rank
	spec  worker.Spec
	epoch uint64
	dead  bool
	// draining is set once the worker's record is draining (Drain): it is never probed again,
	// and the Checker removes it when the drain's settle has passed.
	draining bool
	c        *circuit
	trans    *transitions
	// fresh is set while the worker has not been probed since Own (or since its quarantine
	// ended): a first passing probe of an HTTP or gRPC worker is registration reaching it.
	fresh atomic.Bool
	// listed is set once the worker has answered which models it serves; listing while it is
	// being asked.
	listed, listing atomic.Bool
}

// New returns a running Manager; Close stops it.
func New(o Options) (*Manager, error) {
	if o.Pool == nil {
		return nil, errors.New("owned: Options.Pool is required")
	}
	if err := o.Breaker.Validate(); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	m := &Manager{opts: o, log: o.Logger, pool: o.Pool, grpc: &health.GRPCProber{},
		owned: make(map[worker.ID]*ownedWorker)}
	if o.Clock != nil {
		m.bclock = o.Clock.Now
	}
	m.lists = m.listers()
	m.life, m.stop = context.WithCancel(context.Background())
	bmet, err := breaker.NewMetrics(o.Registerer, m.bclock)
	if err != nil {
		return nil, fmt.Errorf("owned: register breaker metrics: %w", err)
	}
	m.bmet = bmet
	m.checker, err = health.New(health.Options{
		Config: o.Health, NodeID: o.NodeID, GRPCService: o.GRPCService, Modes: m.modes(),
		Clock: o.Clock, Logger: o.Logger, Registerer: o.Registerer,
		OnTransition: m.onTransition, OnRemove: m.onRemove, OnProbeChange: m.changed,
	})
	if err != nil {
		m.grpc.Close()
		m.stop()
		return nil, err
	}
	return m, nil
}

// Close stops every probe, timer and model discovery and closes the probers' connections.
// Breakers stay attached to the pool's workers, frozen.
func (m *Manager) Close() {
	m.ops.Lock()
	defer m.ops.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	_ = m.checker.Close()
	_ = m.grpc.Close()
	m.stop()
	m.discovering.Wait()
}

// Own starts, or updates in place (a PATCH), the health checks and the breaker of a worker this
// gateway owns; the worker should already be in the pool. dead (the is_dead quarantine) stops
// its probes and holds it pending (its meshgw_worker_health reads -1 meanwhile, as for a worker
// no longer checked, and is deleted after health.RemovedSeriesTTL); its breaker is kept. Own is
// idempotent. An invalid spec is logged and ignored.
func (m *Manager) Own(spec worker.Spec, epoch uint64, dead bool) {
	spec = spec.Clone()
	if err := spec.Normalize(); err != nil {
		m.log.Warn("cannot own an invalid worker spec", "url", spec.Redacted().URL, "err", err)
		return
	}
	id := spec.ID()
	m.ops.Lock()
	defer m.ops.Unlock()
	if m.isClosed() {
		return
	}
	ow, changed := m.get(id), false
	if ow == nil {
		ow = m.adopt(spec, epoch, dead, false)
	} else {
		changed = m.update(ow, spec, epoch, dead)
	}
	m.attach(ow)
	m.syncHealth(ow)
	m.changed(id)
	if st, ok := m.checker.Status(id); changed && ok && st.State == health.Ready {
		m.discover(ow) // a PATCH dropped the declared models, or changed the key, of a ready worker
	}
}

// adopt starts managing a worker: its breaker, and its health checks unless it is quarantined.
// A draining worker is added to the Checker in Draining, never probed; Drain settles it.
func (m *Manager) adopt(spec worker.Spec, epoch uint64, dead, draining bool) *ownedWorker {
	id := spec.ID()
	label := metricLabel(id, spec.URL)
	cfg, cls := breaker.Resolve(m.opts.Breaker, spec.Resilience)
	tr := &transitions{now: m.bclock}
	b := breaker.New(cfg, breaker.Options{Clock: m.bclock, Hooks: tr.breakerHooks(m.breakerHooks(id, label)),
		Logger: m.log.With("worker", label, "id", string(id))})
	ow := &ownedWorker{id: id, label: label, spec: spec, epoch: epoch, dead: dead, draining: draining, c: newCircuit(b, cls), trans: tr}
	initial := health.Pending
	if m.opts.Seed != nil {
		if seed, ok := m.opts.Seed(id); ok {
			b.Seed(seed.Breaker, seed.BreakerFailures, seed.BreakerSuccesses, seed.BreakerReopenIn)
			if seed.Health != health.Draining {
				initial = seed.Health
			}
			m.log.Debug("worker owned from its previous owner's last bulletin", "worker", label, "id", string(id),
				"health", initial.String(), "breaker", seed.Breaker.String())
		}
	}
	m.mu.Lock()
	m.owned[id] = ow
	m.mu.Unlock()
	m.log.Debug("worker owned", "worker", label, "id", string(id), "epoch", epoch, "dead", dead, "draining", draining)
	switch {
	case draining:
		m.startChecks(ow, spec, health.Draining)
	case !dead:
		m.startChecks(ow, spec, initial)
	}
	return ow
}

// breakerHooks are the metrics' hooks, which also tell OnChange of a transition and of a count
// a bulletin carries (the failures; the successes only while half-open). Hooks run under the
// breaker's lock, so cur and lastF need no other.
func (m *Manager) breakerHooks(id worker.ID, label string) breaker.Hooks {
	h := m.bmet.Hooks(label)
	if m.opts.OnChange == nil {
		return h
	}
	onTransition, onCounts := h.OnTransition, h.OnCounts
	cur, lastF := breaker.Closed, 0
	h.OnTransition = func(from, to breaker.State) {
		if onTransition != nil {
			onTransition(from, to)
		}
		cur = to
		m.changed(id)
	}
	h.OnCounts = func(f, s int) {
		if onCounts != nil {
			onCounts(f, s)
		}
		if f != lastF || cur == breaker.HalfOpen {
			lastF = f
			m.changed(id)
		}
	}
	return h
}

// update applies Own to a worker already managed: a changed spec in place, the epoch, and the
// quarantine flag. It reports whether the spec changed. A draining worker's quarantine changes
// nothing: it is not probed either way.
func (m *Manager) update(ow *ownedWorker, spec worker.Spec, epoch uint64, dead bool) bool {
	m.mu.Lock()
	changed := !reflect.DeepEqual(ow.spec, spec)
	wasDead, draining := ow.dead, ow.draining
	ow.spec, ow.epoch, ow.dead = spec, epoch, dead
	m.mu.Unlock()
	if changed {
		cfg, cls := breaker.Resolve(m.opts.Breaker, spec.Resilience)
		ow.c.b.Reconfigure(cfg)
		ow.c.cls.Store(&cls)
		if draining || !wasDead && !dead {
			if err := m.checker.Update(spec); err != nil {
				m.log.Warn("cannot update the health checks of a worker", "worker", ow.label, "err", err)
			}
		}
	}
	if draining {
		return changed
	}
	switch {
	case dead && !wasDead:
		m.checker.Remove(ow.id)
		m.log.Info("worker quarantined: health checks stopped", "worker", ow.label, "id", string(ow.id))
	case !dead && wasDead:
		m.log.Info("worker quarantine released: verifying it again", "worker", ow.label, "id", string(ow.id))
		m.startChecks(ow, spec, health.Pending)
	}
	return changed
}

// startChecks adds the worker to the Checker in state initial (pending, unless seeded), its
// next passing probe counting as registration reaching it while pending.
func (m *Manager) startChecks(ow *ownedWorker, spec worker.Spec, initial health.State) {
	ow.fresh.Store(initial == health.Pending)
	if err := m.checker.Add(spec, initial); err != nil {
		m.log.Warn("cannot start the health checks of a worker", "worker", ow.label, "err", err)
	}
}

// Disown stops probing and breaking a worker (removed, or owned elsewhere now), after telling
// Options.OnDisown its last state. It does not remove the worker from the pool.
func (m *Manager) Disown(id worker.ID) {
	m.ops.Lock()
	defer m.ops.Unlock()
	if f := m.opts.OnDisown; f != nil {
		if st, ok := m.Status(id); ok {
			f(id, st)
		}
	}
	if ow := m.forget(id); ow != nil {
		m.checker.Remove(id)
		m.log.Debug("worker disowned", "worker", ow.label, "id", string(id))
	}
}

// Drain owns a worker whose record is draining (a DELETE accepted through raft), as Own does,
// and finishes the drain: the worker is not probed any more and its health reads draining, and
// once settle has passed since the drain started (since, on the clock of the gateway that took
// the DELETE) the manager forgets it and calls OnRemove with its epoch, so that the record is
// removed fenced by (owner, epoch). A drain whose settle has passed already (a restart, a
// failover) ends at once; one that starts in the future (a clock ahead of this one) waits no
// more than settle. Drain again, or Own, keeps the first deadline.
func (m *Manager) Drain(spec worker.Spec, epoch uint64, dead bool, since time.Time, settle time.Duration) {
	spec = spec.Clone()
	if err := spec.Normalize(); err != nil {
		m.log.Warn("cannot drain an invalid worker spec", "url", spec.Redacted().URL, "err", err)
		return
	}
	id := spec.ID()
	m.ops.Lock()
	defer m.ops.Unlock()
	if m.isClosed() {
		return
	}
	ow := m.get(id)
	if ow == nil {
		ow = m.adopt(spec, epoch, dead, true)
	} else {
		m.startDraining(ow) // first: update then leaves the quarantine's checks alone
		m.update(ow, spec, epoch, dead)
	}
	m.attach(ow)
	m.syncHealth(ow) // a worker adopted draining reads draining from the start
	m.changed(id)
	left := drainLeft(since, settle, m.now())
	m.log.Info("worker record draining: removing it once the settle time has passed", "worker", ow.label,
		"id", string(id), "epoch", epoch, "settle", settle, "left", left)
	// Last: a drain whose settle has passed removes the worker at once, and its bulletin ends
	// (OnForget), which no later OnChange may undo.
	m.checker.DrainFor(id, left)
}

// startDraining marks an owned worker draining and makes sure the Checker holds it (a
// quarantined worker is not checked), so that DrainFor can settle it.
func (m *Manager) startDraining(ow *ownedWorker) {
	m.mu.Lock()
	ow.draining = true
	spec := ow.spec
	m.mu.Unlock()
	if _, ok := m.checker.Status(ow.id); !ok {
		m.startChecks(ow, spec, health.Draining)
	}
}

// drainLeft is what is left at now of a drain that started at since for settle: never below
// zero, and never above settle, so that a proposer whose clock runs ahead cannot stretch it.
func drainLeft(since time.Time, settle time.Duration, now time.Time) time.Duration {
	left := since.Add(settle).Sub(now)
	return min(max(left, 0), settle)
}

func (m *Manager) now() time.Time {
	if m.opts.Clock != nil {
		return m.opts.Clock.Now()
	}
	return time.Now()
}

// Status returns an owned worker's runtime state; ok is false when the worker is not owned.
func (m *Manager) Status(id worker.ID) (Status, bool) {
	ow := m.get(id)
	if ow == nil {
		return Status{}, false
	}
	m.mu.Lock()
	st := Status{Epoch: ow.epoch, Dead: ow.dead}
	m.mu.Unlock()
	if hs, ok := m.checker.Status(id); ok {
		st.Health, st.ConsecutiveFailures, st.ConsecutiveSuccesses = hs.State, hs.ConsecutiveFailures, hs.ConsecutiveSuccesses
		st.LastError, st.LastStatusCode, st.LastProbe, st.Probed = hs.LastError, hs.LastStatusCode, hs.LastProbe, hs.Probed
		st.Interval = hs.Interval
	}
	st.Breaker = ow.c.b.Snapshot()
	st.Transitions = ow.trans.recent()
	return st, true
}

// changed tells Options.OnChange.
func (m *Manager) changed(id worker.ID) {
	if f := m.opts.OnChange; f != nil {
		f(id)
	}
}

// OnOutcome records a request's outcome on worker w: status is what w answered, connErr that it
// gave no answer. Plug it into gateway.Config.OnOutcome. Workers not owned here are skipped.
func (m *Manager) OnOutcome(w *pool.Worker, status int, connErr bool) {
	if c, ok := w.Breaker().(*circuit); ok {
		c.record(status, connErr)
	}
}

func (m *Manager) get(id worker.ID) *ownedWorker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owned[id]
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// forget drops a worker from the manager: its breaker leaves the pool's worker and its series
// read removed. It returns the worker, nil when it was not owned.
func (m *Manager) forget(id worker.ID) *ownedWorker {
	m.mu.Lock()
	ow := m.owned[id]
	delete(m.owned, id)
	m.mu.Unlock()
	if ow == nil {
		return nil
	}
	if w := m.pool.Get(id); w != nil && w.Breaker() == pool.Breaker(ow.c) {
		_ = m.pool.SetBreaker(id, nil)
	}
	m.bmet.Removed(ow.label)
	if f := m.opts.OnForget; f != nil {
		f(id)
	}
	return ow
}

// attach makes sure the pool's worker carries the worker's breaker (the pool may have replaced
// or re-added it).
func (m *Manager) attach(ow *ownedWorker) {
	w := m.pool.Get(ow.id)
	if w == nil {
		m.log.Warn("owned worker is not in the pool yet", "worker", ow.label, "id", string(ow.id))
		return
	}
	if w.Breaker() != pool.Breaker(ow.c) {
		_ = m.pool.SetBreaker(ow.id, ow.c)
	}
}

// metricLabel is the worker label of the metrics, as the health package makes it: the URL, with
// "@RANK" for a data-parallel rank so that ranks of one engine stay apart.
func metricLabel(id worker.ID, url string) string {
	if _, rank, ok := strings.Cut(string(id), "@"); ok {
		return url + "@" + rank
	}
	return url
}
