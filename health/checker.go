package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshgw/meshgw/worker"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxInFlight bounds the probes running at once.
const DefaultMaxInFlight = 128

// Mode is how the Checker probes the workers of one connection mode.
type Mode struct {
	Prober Prober
	// ProbeWhenDisabled keeps probing, and judging, a worker of this mode whose health checks are
	// disabled. ZMQ sets it: its local check also reconnects a restarted engine.
	ProbeWhenDisabled bool
}

// RemoveReason says why the Checker asks for a worker's removal.
type RemoveReason uint8

// Why a worker is removed.
const (
	RemovedFailed  RemoveReason = iota + 1 // reached failed with --remove-unhealthy-workers
	RemovedDrained                         // drained (after the settle period, or at once)
)

func (r RemoveReason) String() string {
	switch r {
	case RemovedFailed:
		return "failed"
	case RemovedDrained:
		return "drained"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Options configure a Checker. Nil and zero fields have the defaults given.
type Options struct {
	// Config holds the health flags; it must pass Validate (start from DefaultConfig).
	Config Config
	// NodeID is this gateway's node id, sent to engines as X-Mesh-Gateway.
	NodeID string
	// GRPCService is the gRPC health service checked on gRPC workers; "" (default) checks the
	// server as a whole.
	GRPCService string
	// Modes maps a connection mode (worker.ModeHTTP, ...) to its prober. A worker whose mode has
	// no entry is not probed: it stays pending until MarkReached, or counts ready when its checks
	// are disabled.
	Modes map[string]Mode
	// MaxInFlight bounds the probes running at once. Default 128.
	MaxInFlight int
	// Clock is the source of time. Default: the real clock.
	Clock Clock
	// Logger receives one line per state change. Default: slog.Default().
	Logger *slog.Logger
	// Registerer receives the health metrics. Default: none registered.
	Registerer prometheus.Registerer
	// OnTransition is called after every state change, in order, outside the Checker's lock
	// (it may call the Checker). promotion tells the breaker (DESIGN.md section 7).
	OnTransition func(id worker.ID, from, to State, promotion bool)
	// OnRemove is called after the Checker has dropped a worker on its own: failed with
	// RemoveUnhealthyWorkers, or drained. The owner then removes the record (raft CAS).
	OnRemove func(id worker.ID, reason RemoveReason)
	// OnProbeChange is called, in order with OnTransition and outside the lock, when a probe
	// changed the worker's last error or last status code without a state change (a first
	// failure below the threshold, another error, a pass that clears them). The owner's
	// bulletins carry those fields; a probe that changes nothing calls nothing.
	OnProbeChange func(id worker.ID)
}

// Status is a worker's runtime health, as GET /workers reports it.
type Status struct {
	ID                   worker.ID
	URL                  string
	State                State
	ConsecutiveFailures  int
	ConsecutiveSuccesses int
	// LastError and LastStatusCode describe the last probe if it failed; a pass clears them.
	LastError      string
	LastStatusCode int
	// LastProbe is when the last probe finished; zero before the first.
	LastProbe time.Time
	// Probed is false when the worker is not probed (checks disabled, or no prober).
	Probed bool
	// BackoffSweeps is how many sweeps the next probe skips after 429 answers.
	BackoffSweeps int
	// Interval is the time between two probes of the worker (its override, else the flag).
	Interval time.Duration
}

// ErrClosed is returned by a Checker after Close.
var ErrClosed = errors.New("health: checker closed")

// Checker schedules the probes of every owned worker and runs their state machines. One timer
// drives all workers; each probe runs in its own goroutine with its own timeout.
type Checker struct {
	cfg     Config
	opts    Options
	clock   Clock
	log     *slog.Logger
	met     *metrics
	max     int
	ctx     context.Context // canceled by Close: stops the probes in flight
	cancel  context.CancelFunc
	wg      sync.WaitGroup // probe goroutines
	notify  sync.Mutex     // held while delivering callbacks, so they arrive in order
	mu      sync.Mutex     // guards everything below
	closed  bool
	workers map[worker.ID]*entry
	sched   schedule
	backlog []*entry // due while MaxInFlight probes ran
	running int
	pending []func() // callbacks to deliver, in order
	timer   func() bool
	timerAt time.Time
}

// New returns a running Checker. Call Close to stop it.
func New(opts Options) (*Checker, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	clock := opts.Clock
	if clock == nil {
		clock = realClock{}
	}
	met, err := newMetrics(opts.Registerer, clock.Now)
	if err != nil {
		return nil, fmt.Errorf("health: register metrics: %w", err)
	}
	c := &Checker{cfg: opts.Config, opts: opts, clock: clock, log: opts.Logger, met: met,
		max: opts.MaxInFlight, workers: make(map[worker.ID]*entry)}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.max <= 0 {
		c.max = DefaultMaxInFlight
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Close stops all probes and timers and waits for the probes in flight to return.
func (c *Checker) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	if c.timer != nil {
		c.timer()
	}
	for _, e := range c.workers {
		if e.stopSettle != nil {
			e.stopSettle()
		}
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// Add starts checking the worker of spec in state initial: Pending for a new worker, Ready when
// registration already reached it, or the state carried over from the previous owner's bulletin.
// A probed worker is probed at once; a worker added in Failed with RemoveUnhealthyWorkers is
// removed at once (OnRemove). A worker added Draining (its removal is already under way, say
// after a restart) is never probed and stays until DrainFor or Remove. Add fails on an invalid
// spec, an unknown initial state, or a worker already added.
func (c *Checker) Add(spec worker.Spec, initial State) error {
	if initial > Draining {
		return fmt.Errorf("health: add %s: cannot start in state %v", spec.Redacted().URL, initial)
	}
	spec = spec.Clone()
	if err := spec.Normalize(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.flush()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	id := spec.ID()
	if c.workers[id] != nil {
		return fmt.Errorf("health: worker %s is already checked", id)
	}
	e := &entry{id: id, label: metricLabel(id, spec.URL), index: -1}
	c.configure(e, &spec)
	e.m = NewMachine(e.set.FailureThreshold, e.set.SuccessThreshold, initial)
	c.workers[id] = e
	c.met.setState(e.label, initial)
	if initial == Failed && c.cfg.RemoveUnhealthyWorkers {
		c.drop(e, RemovedFailed) // carried over failed: the previous owner did not remove it
		return nil
	}
	c.reconcile(e, false)
	return nil
}

// Update applies a changed spec (a PATCH) in place, keeping the worker's state and counts.
func (c *Checker) Update(spec worker.Spec) error {
	spec = spec.Clone()
	if err := spec.Normalize(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.flush()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	e := c.workers[spec.ID()]
	if e == nil {
		return fmt.Errorf("health: worker %s is not checked", spec.ID())
	}
	was, wasProbed := e.set, c.probed(e)
	c.configure(e, &spec)
	e.m.SetThresholds(e.set.FailureThreshold, e.set.SuccessThreshold)
	c.reconcile(e, wasProbed && was.Interval != e.set.Interval)
	return nil
}

// Remove forgets a worker at once, without callbacks: its record is gone. It reports whether
// the worker was checked.
func (c *Checker) Remove(id worker.ID) bool {
	c.mu.Lock()
	defer c.flush()
	defer c.mu.Unlock()
	e := c.workers[id]
	if e == nil {
		return false
	}
	c.drop(e, 0)
	return true
}

// Drain moves a worker to draining and stops probing it. A ready worker is removed (OnRemove)
// after its settle period, which Drain returns; any other worker is removed at once (settle 0).
// ok is false when the worker is not checked or the Checker is closed.
func (c *Checker) Drain(id worker.ID) (settle time.Duration, ok bool) {
	return c.drain(id, func(tr Transition, set Settings) time.Duration {
		if !tr.Settle {
			return 0
		}
		return set.DrainSettle
	})
}

// DrainFor moves a worker to draining, whatever its state, stops probing it, and removes it
// (OnRemove) once settle has passed, at once when settle is not positive: the drain of a record
// that was decided elsewhere (an owner that finishes a DELETE accepted through raft). A worker
// already draining keeps the settle it had. ok is false when the worker is not checked or the
// Checker is closed.
func (c *Checker) DrainFor(id worker.ID, settle time.Duration) (ok bool) {
	_, ok = c.drain(id, func(Transition, Settings) time.Duration { return settle })
	return ok
}

// drain runs Drain and DrainFor: settleOf says how long a worker that starts draining settles.
func (c *Checker) drain(id worker.ID, settleOf func(Transition, Settings) time.Duration) (settle time.Duration, ok bool) {
	c.mu.Lock()
	defer c.flush()
	defer c.mu.Unlock()
	e := c.workers[id]
	if e == nil || c.closed {
		return 0, false
	}
	if e.stopSettle != nil {
		return e.settle, true // already settling
	}
	tr := e.m.Apply(Drain)
	if tr.Changed() {
		c.sched.remove(e)
		c.changed(e, tr, "drain requested")
	}
	e.settle = settleOf(tr, e.set)
	if e.settle <= 0 {
		e.settle = 0
		c.drop(e, RemovedDrained)
		return 0, true
	}
	e.stopSettle = c.clock.AfterFunc(e.settle, func() { c.settled(e) })
	return e.settle, true
}

func (c *Checker) settled(e *entry) {
	defer c.recoverLog("drain settle")
	c.mu.Lock()
	defer c.flush()
	defer c.mu.Unlock()
	if !e.gone && !c.closed {
		c.drop(e, RemovedDrained)
	}
}

// MarkReached tells the Checker that a worker was reached outside a probe (a ZMQ handshake
// completed): a pending worker becomes ready at once.
func (c *Checker) MarkReached(id worker.ID) bool {
	c.mu.Lock()
	defer c.flush()
	defer c.mu.Unlock()
	e := c.workers[id]
	if e == nil || c.closed {
		return false
	}
	c.apply(e, Reached, "reached at registration")
	return true
}

// Status returns a worker's health; ok is false when it is not checked.
func (c *Checker) Status(id worker.ID) (s Status, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.workers[id]
	if e == nil {
		return Status{}, false
	}
	return c.status(e), true
}

// Statuses returns the health of every checked worker, sorted by id.
func (c *Checker) Statuses() []Status {
	c.mu.Lock()
	out := make([]Status, 0, len(c.workers))
	for _, e := range c.workers {
		out = append(out, c.status(e))
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return out
}

func (c *Checker) status(e *entry) Status {
	return Status{
		ID: e.id, URL: e.target.URL, State: e.m.State(),
		ConsecutiveFailures: e.m.ConsecutiveFailures(), ConsecutiveSuccesses: e.m.ConsecutiveSuccesses(),
		LastError: e.lastErr, LastStatusCode: e.lastCode, LastProbe: e.lastProbe,
		Probed: c.probed(e), BackoffSweeps: backoffSweeps(e.throttled), Interval: e.set.Interval,
	}
}

// metricLabel is the worker label of the metrics: the URL, with "@RANK" for a data-parallel rank
// so that ranks of one engine stay apart.
func metricLabel(id worker.ID, url string) string {
	if _, rank, ok := strings.Cut(string(id), "@"); ok {
		return url + "@" + rank
	}
	return url
}
