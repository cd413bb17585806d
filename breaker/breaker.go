package breaker

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Hooks are the breaker's side effects, wired by the caller (metrics.go, logs, bulletins). A nil
// field does nothing. Hooks run with the breaker's lock held, in the order of the events they
// report, so a gauge they set always ends on the current value; they must be quick and must not
// call back into the Breaker.
type Hooks struct {
	// OnTransition is called on every real change of state, and only then.
	OnTransition func(from, to State)
	// OnOutcome is called for every Success or Failure recorded (Ignored is not recorded).
	OnOutcome func(o Outcome)
	// OnCounts is called when the consecutive failure or success count changed, with the new
	// values.
	OnCounts func(failures, successes int)
	// OnReadmission is called when a health promotion moved an open circuit to half-open
	// (worker_cb_health_readmissions_total), after that move's OnTransition.
	OnReadmission func()
	// OnHang is called when the hang rule (hang.go) opened a closed circuit, after that
	// move's OnTransition.
	OnHang func()
}

// Options are a breaker's collaborators; the zero value is the real clock, no hooks, no logs.
type Options struct {
	// Clock is the time source; nil is time.Now.
	Clock Clock
	// Hooks receive the breaker's events.
	Hooks Hooks
	// Logger, when set, gets one INFO line per state change. Give it the worker's URL as an
	// attribute, never its API key.
	Logger *slog.Logger
}

// Snapshot is a breaker's state at one moment, for GET /workers and bulletins.
type Snapshot struct {
	State                State     `json:"state"`
	ConsecutiveFailures  int       `json:"consecutive_failures"`
	ConsecutiveSuccesses int       `json:"consecutive_successes"`
	OpenedAt             time.Time `json:"opened_at,omitzero"` // when the circuit last opened; zero if never
	// ReopensAt is, while the circuit is open, when its timeout passes (it then admits a trial
	// as half-open); zero otherwise.
	ReopensAt time.Time `json:"reopens_at,omitzero"`
}

// Breaker is one worker's circuit breaker. Allow is the request hot path: on a closed or
// half-open circuit it is a single atomic load, and on an open one a clock read and a second
// atomic load until the timeout has passed. Record, Promote and Snapshot take a mutex. All
// methods are safe for concurrent use.
type Breaker struct {
	state    atomic.Int32 // State; written only under mu, read lock-free
	reopenAt atomic.Int64 // while open: nanoseconds since base at which the timeout has passed

	clock Clock
	base  time.Time // clock reading at New; reopenAt counts from it (monotonic)
	hooks Hooks
	log   *slog.Logger

	mu               sync.Mutex
	failureThreshold int // the config: set by New and Reconfigure
	successThreshold int
	timeout          time.Duration
	hangTimeout      time.Duration // Config.HangTimeout; 0: the hang rule is off
	hang             hangWatch
	failures         int // consecutive failures
	successes        int // consecutive successes
	openedAt         time.Time
}

// New returns a closed breaker. cfg must be valid (see Config.Validate; Resolve of a valid flags
// config always is); New panics otherwise, since that is a wiring bug.
func New(cfg Config, opt Options) *Breaker {
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("breaker.New: %v", err))
	}
	return &Breaker{
		failureThreshold: cfg.EffectiveFailureThreshold(),
		successThreshold: cfg.SuccessThreshold,
		timeout:          cfg.Timeout,
		hangTimeout:      cfg.HangTimeout,
		clock:            opt.Clock,
		base:             opt.Clock.Now(),
		hooks:            opt.Hooks,
		log:              opt.Logger,
	}
}

// Allow reports whether a request may be sent to the worker now: always on a closed or
// half-open circuit (half-open is not throttled), never on an open one until its timeout has
// passed, when this check moves it to half-open and allows.
func (b *Breaker) Allow() bool {
	// Small enough to inline: the closed and half-open cases cost one atomic load.
	return State(b.state.Load()) != Open || b.openState() != Open
}

// State returns the circuit's state. Like Allow, it moves an open circuit whose timeout has
// passed to half-open, so that every reader agrees on what is routable.
func (b *Breaker) State() State {
	if s := State(b.state.Load()); s != Open {
		return s
	}
	return b.openState()
}

// openState is State's path for a circuit last seen open: lock-free until the timeout passes.
func (b *Breaker) openState() State {
	if !b.timedOut(b.clock.Now()) {
		return State(b.state.Load())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expireLocked()
	return State(b.state.Load())
}

// Record counts the outcome of one request (the caller records one outcome per request per
// engine worker, however many attempts it made, and one per attempt on an external provider:
// step 4 of the package doc). Success resets the failure count and, after
// SuccessThreshold in a row, closes a half-open circuit. Failure resets the success count, opens
// a closed circuit at FailureThreshold in a row, and reopens a half-open one for a full timeout.
// TimedOut is a Failure that the hang rule (hang.go) also counts: it opens a closed circuit
// when the rule judges the worker hung, unless the breaker is disabled (MaxThreshold). On an
// open circuit (a request that was let through before it opened) outcomes are counted but
// change no state. Ignored does nothing at all.
func (b *Breaker) Record(o Outcome) {
	if o != Success && o != Failure && o != TimedOut {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	f, s := b.failures, b.successes
	var hung bool
	b.hang, hung = b.hang.next(o, b.clock.Now(), b.hangTimeout)
	switch st := State(b.state.Load()); o {
	case Success:
		b.failures, b.successes = 0, b.successes+1
		if st == HalfOpen && b.successes >= b.successThreshold {
			b.transitionLocked(Closed)
		}
	case Failure, TimedOut:
		b.failures, b.successes = b.failures+1, 0
		switch {
		case st == HalfOpen || st == Closed && b.failures >= b.failureThreshold:
			b.transitionLocked(Open)
		case st == Closed && hung && b.failureThreshold < MaxThreshold:
			b.transitionLocked(Open)
			if b.log != nil {
				b.log.Warn("circuit opened: the worker answered no request while requests to it timed out (hang rule)",
					"timed_out", HangTimeouts, "request_timeout", b.hangTimeout)
			}
			if b.hooks.OnHang != nil {
				b.hooks.OnHang()
			}
		}
	}
	if b.hooks.OnOutcome != nil {
		b.hooks.OnOutcome(o)
	}
	b.countsChangedLocked(f, s)
}

// Promote tells the breaker that health checks promoted the worker to ready. An open circuit
// moves to half-open at once, without waiting for its timeout, and the move is counted as a
// health readmission; a closed circuit forgets its consecutive failures; a half-open circuit
// is left alone, its trial already running. So each promotion starts at most one trial. Every
// circuit forgets the timed-out requests the hang rule counted.
//
// Contract: call Promote only on a real flip to ready (from pending, not_ready or failed).
// Passing probes on a worker that is already ready are not a promotion: calling Promote for
// them would readmit an open circuit on every probe and defeat the timeout.
func (b *Breaker) Promote() {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, s := b.failures, b.successes
	b.hang = hangWatch{} // a worker back from not_ready or failed starts a new watch
	switch State(b.state.Load()) {
	case Open:
		b.transitionLocked(HalfOpen)
		if b.hooks.OnReadmission != nil {
			b.hooks.OnReadmission()
		}
	case Closed:
		b.failures = 0
	}
	b.countsChangedLocked(f, s)
}

// Reconfigure applies a changed config (a PATCH of the worker's resilience overrides) in place,
// keeping the state and the counts. The new thresholds are judged at the next outcome; a new
// timeout applies from the next opening. cfg must be valid, as for New.
func (b *Breaker) Reconfigure(cfg Config) {
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("breaker.Reconfigure: %v", err))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failureThreshold = cfg.EffectiveFailureThreshold()
	b.successThreshold = cfg.SuccessThreshold
	b.timeout = cfg.Timeout
	b.hangTimeout = cfg.HangTimeout
}

// Snapshot returns the breaker's state and counts, after moving an open circuit whose timeout
// has passed to half-open (as State does).
func (b *Breaker) Snapshot() Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expireLocked()
	s := Snapshot{
		State:                State(b.state.Load()),
		ConsecutiveFailures:  b.failures,
		ConsecutiveSuccesses: b.successes,
		OpenedAt:             b.openedAt,
	}
	if s.State == Open {
		s.ReopensAt = b.base.Add(time.Duration(b.reopenAt.Load()))
	}
	return s
}

// Seed sets the state and counts a new owner takes over from the last bulletin of the worker's
// previous owner (ownership failover, DESIGN.md section 5): an open circuit stays open for the
// reopenIn that was left of its timeout, so one breaker keeps deciding across the move. Hooks
// fire as for a real change.
func (b *Breaker) Seed(st State, failures, successes int, reopenIn time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, s := b.failures, b.successes
	if st == Open {
		// transitionLocked starts a full timeout; the seeded deadline replaces it below.
		b.transitionLocked(Open)
		now := b.clock.Now()
		b.reopenAt.Store(int64(now.Sub(b.base) + max(reopenIn, 0)))
	} else {
		b.transitionLocked(st)
	}
	b.failures, b.successes = max(failures, 0), max(successes, 0)
	b.countsChangedLocked(f, s)
}

// timedOut reports whether an open circuit's timeout has passed at now.
func (b *Breaker) timedOut(now time.Time) bool {
	return int64(now.Sub(b.base)) >= b.reopenAt.Load()
}

// expireLocked moves an open circuit whose timeout has passed to half-open.
func (b *Breaker) expireLocked() {
	if State(b.state.Load()) == Open && b.timedOut(b.clock.Now()) {
		f, s := b.failures, b.successes
		b.transitionLocked(HalfOpen)
		b.countsChangedLocked(f, s)
	}
}

// transitionLocked moves the circuit to state to, resetting counts as SMG does: entering
// closed or half-open clears both counts; entering open clears the success count and starts
// a full timeout. It fires OnTransition only when the state really changes; the caller fires
// OnCounts once for its whole operation.
func (b *Breaker) transitionLocked(to State) {
	from := State(b.state.Load())
	if from == to {
		return
	}
	switch to {
	case Open:
		now := b.clock.Now()
		b.openedAt = now
		b.successes = 0
		// Publish the deadline before the state, so a lock-free reader that sees Open also
		// sees this opening's deadline.
		b.reopenAt.Store(int64(now.Sub(b.base) + b.timeout))
	default:
		b.failures, b.successes = 0, 0
	}
	b.state.Store(int32(to))
	if b.log != nil {
		b.log.Info("circuit breaker state change", "from", from.String(), "to", to.String())
	}
	if b.hooks.OnTransition != nil {
		b.hooks.OnTransition(from, to)
	}
}

// countsChangedLocked fires OnCounts if the counts differ from f and s.
func (b *Breaker) countsChangedLocked(f, s int) {
	if b.hooks.OnCounts != nil && (f != b.failures || s != b.successes) {
		b.hooks.OnCounts(b.failures, b.successes)
	}
}
