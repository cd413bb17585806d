package health

import "fmt"

// State is a worker's health state (DESIGN.md section 6).
type State uint8

// The five health states. Pending is the zero value: a worker nobody has verified yet.
const (
	Pending  State = iota // registered, not yet verified: no traffic
	Ready                 // passing: takes traffic
	NotReady              // consecutive failures reached F: no traffic, still probed
	Failed                // liveness threshold reached: no traffic, removed or still probed
	Draining              // being removed: no new requests, not probed
)

var stateNames = [...]string{"pending", "ready", "not_ready", "failed", "draining"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// ParseState returns the state named name, as String spells it.
func ParseState(name string) (State, error) {
	for i, n := range stateNames {
		if n == name {
			return State(i), nil
		}
	}
	return 0, fmt.Errorf("unknown health state %q", name)
}

// Event is something that happened to a worker and may move its state.
type Event uint8

// The events a Machine takes.
const (
	// Success is a passing probe.
	Success Event = iota
	// Failure is a failing probe.
	Failure
	// Reached says that registration already reached the worker (HTTP and gRPC when
	// registration completes, ZMQ when its handshake completes): pending becomes ready at once.
	Reached
	// ChecksOff says that health checks were turned off for the worker: it counts ready.
	ChecksOff
	// Drain starts removing the worker.
	Drain
)

var eventNames = [...]string{"success", "failure", "reached", "checks_off", "drain"}

func (e Event) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("event(%d)", uint8(e))
}

// Default thresholds (the flags' defaults).
const (
	DefaultFailureThreshold = 3
	DefaultSuccessThreshold = 2
)

// Multiples of the failure threshold F (DESIGN.md section 6).
const (
	pendingAttemptsPerF  = 10 // pending → failed after 10 × F probes without reaching S
	notReadyFailuresPerF = 3  // not_ready → failed after 3 × F further consecutive failures
)

// Transition is what applying one event did.
type Transition struct {
	From, To State
	// Promotion is set on a move to ready from pending, not_ready or failed: the breaker is told
	// (DESIGN.md section 7). Passing probes on a worker already ready are not a promotion.
	Promotion bool
	// Settle is set on a Drain of a ready worker: it drains for the settle period before it is
	// removed. A Drain of any other worker also moves it to draining, with Settle false: the
	// caller removes it at once.
	Settle bool
}

// Changed reports whether the state changed; side effects fire only when it did.
func (t Transition) Changed() bool { return t.From != t.To }

// Machine is one worker's health state machine: pure, with no clock and no I/O. The zero value
// is a pending machine with the default thresholds. It is not safe for concurrent use.
type Machine struct {
	state State
	f, s  int
	// succs and fails are the consecutive successes and failures of the worker, for operators.
	succs, fails int
	// streak counts the failures toward the current state's threshold: since the last success in
	// ready, and since entering not_ready (or the last success there) in not_ready.
	streak int
	// attempts counts the probes made while pending.
	attempts int
}

// NewMachine returns a machine in state initial with failure threshold f and success threshold
// s; thresholds below 1 mean the defaults.
func NewMachine(f, s int, initial State) Machine {
	m := Machine{state: initial}
	m.SetThresholds(f, s)
	return m
}

// SetThresholds changes the thresholds in place, keeping the state and the counts (a PATCH of
// the worker's health block). Values below 1 mean the defaults. The new thresholds are judged at
// the next event.
func (m *Machine) SetThresholds(f, s int) {
	m.f, m.s = f, s
}

// Thresholds returns the failure and success thresholds in force.
func (m *Machine) Thresholds() (f, s int) {
	f, s = m.f, m.s
	if f < 1 {
		f = DefaultFailureThreshold
	}
	if s < 1 {
		s = DefaultSuccessThreshold
	}
	return f, s
}

// State returns the current state.
func (m *Machine) State() State { return m.state }

// ConsecutiveFailures returns the failures since the last success.
func (m *Machine) ConsecutiveFailures() int { return m.fails }

// ConsecutiveSuccesses returns the successes since the last failure.
func (m *Machine) ConsecutiveSuccesses() int { return m.succs }

// Apply applies ev and returns what it did. A draining machine takes no events.
func (m *Machine) Apply(ev Event) Transition {
	from := m.state
	if from == Draining {
		return Transition{From: from, To: from}
	}
	switch ev {
	case Success:
		m.success()
	case Failure:
		m.failure()
	case Reached:
		if m.state == Pending {
			m.enter(Ready)
		}
	case ChecksOff:
		if m.state != Ready {
			m.enter(Ready)
		}
	case Drain:
		m.enter(Draining)
		return Transition{From: from, To: Draining, Settle: from == Ready}
	}
	return Transition{From: from, To: m.state, Promotion: m.state == Ready && from != Ready}
}

func (m *Machine) success() {
	f, s := m.Thresholds()
	m.succs++
	m.fails, m.streak = 0, 0
	switch m.state {
	case Pending:
		m.attempts++
		if m.succs >= s {
			m.enter(Ready)
		} else if m.attempts >= pendingAttemptsPerF*f {
			m.enter(Failed)
		}
	case NotReady, Failed:
		if m.succs >= s {
			m.enter(Ready)
		}
	}
}

func (m *Machine) failure() {
	f, _ := m.Thresholds()
	m.fails++
	m.succs = 0
	switch m.state {
	case Pending:
		m.attempts++
		if m.attempts >= pendingAttemptsPerF*f {
			m.enter(Failed)
		}
	case Ready:
		m.streak++
		if m.streak >= f {
			m.enter(NotReady)
		}
	case NotReady:
		m.streak++
		if m.streak >= notReadyFailuresPerF*f {
			m.enter(Failed)
		}
	}
}

// enter moves to next and restarts the counts that belong to a state.
func (m *Machine) enter(next State) {
	m.state = next
	m.streak = 0
	m.attempts = 0
}
