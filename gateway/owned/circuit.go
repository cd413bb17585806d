package owned

import (
	"sync/atomic"

	"github.com/meshgw/meshgw/breaker"
)

// circuit is an owned worker's breaker as the pool and the data plane see it: selection asks
// Allow, and OnOutcome records through the worker's classifier. The classifier is swapped
// atomically when a PATCH changes the worker's status lists.
type circuit struct {
	b   *breaker.Breaker
	cls atomic.Pointer[breaker.Classifier]
}

func newCircuit(b *breaker.Breaker, cls breaker.Classifier) *circuit {
	c := &circuit{b: b}
	c.cls.Store(&cls)
	return c
}

// Allow implements pool.Breaker.
func (c *circuit) Allow() bool { return c.b.Allow() }

// record classifies one request's outcome on the worker and records it: a status in the
// retryable list (and not a capacity status) or no answer at all is a failure (no answer within
// the request timeout, breaker.NoResponseInTime, a TimedOut the hang rule counts), a capacity
// status is nothing, anything else a success.
func (c *circuit) record(status int, connErr bool) {
	c.b.Record(c.cls.Load().ClassifyAttempt(status, connErr))
}
