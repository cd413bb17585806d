package breaker

import (
	"fmt"
	"time"
)

// State is a circuit's state. Its numeric value is the value of the worker_cb_state metric:
// 0 closed, 1 open, 2 half-open.
type State int32

// The three states of a circuit.
const (
	// Closed lets every request through and counts consecutive failures.
	Closed State = 0
	// Open lets no request through until the timeout passes or health promotes the worker.
	Open State = 1
	// HalfOpen lets every request through (it is not throttled) and closes after enough
	// consecutive successes; any failure reopens it.
	HalfOpen State = 2
)

var stateNames = [...]string{Closed: "closed", Open: "open", HalfOpen: "half_open"}

// String returns "closed", "open" or "half_open", the names SMG uses in logs, metric labels and
// GET /workers.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// MarshalText encodes the state as its name, so JSON shows "half_open" rather than 2.
func (s State) MarshalText() ([]byte, error) {
	if s < 0 || int(s) >= len(stateNames) {
		return nil, fmt.Errorf("breaker: unknown state %d", int32(s))
	}
	return []byte(stateNames[s]), nil
}

// UnmarshalText decodes a state name written by MarshalText.
func (s *State) UnmarshalText(b []byte) error {
	for i, n := range stateNames {
		if string(b) == n {
			*s = State(i)
			return nil
		}
	}
	return fmt.Errorf("breaker: unknown state %q (want closed, open or half_open)", b)
}

// Outcome is what one request did to a worker, as the breaker counts it.
type Outcome uint8

// The outcomes of a request.
const (
	// Ignored changes nothing: a capacity status (429 by default) or a shed by the gateway itself.
	// It is the zero value, so an unclassified outcome can never trip a circuit.
	Ignored Outcome = iota
	// Success resets the consecutive failure count.
	Success
	// Failure counts towards opening the circuit.
	Failure
	// TimedOut is a Failure whose request got no answer at all (not even a response header)
	// within the request timeout. It counts as a Failure, and towards the hang rule (hang.go).
	TimedOut
)

var outcomeNames = [...]string{Ignored: "ignored", Success: "success", Failure: "failure", TimedOut: "timed_out"}

// String returns "ignored", "success", "failure" or "timed_out". The worker_cb_outcomes_total
// labels are "success" and "failure", a TimedOut counted as a failure.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Clock returns the current time. The zero value (nil) is the real clock, time.Now.
type Clock func() time.Time

// Now returns the time from c, or time.Now when c is nil.
func (c Clock) Now() time.Time {
	if c == nil {
		return time.Now()
	}
	return c()
}
