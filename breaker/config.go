package breaker

import (
	"fmt"
	"math"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// MaxThreshold is the failure threshold of a disabled breaker: so many consecutive failures
// that its circuit stays closed, while outcomes are still counted.
const MaxThreshold = math.MaxInt32

// Config is one breaker's configuration, from the --cb-* flags and the worker's overrides.
type Config struct {
	// FailureThreshold is the number of consecutive failed requests that opens a closed
	// circuit (--cb-failure-threshold, default 10).
	FailureThreshold int
	// SuccessThreshold is the number of consecutive successes that closes a half-open circuit
	// (--cb-success-threshold, default 3).
	SuccessThreshold int
	// Timeout is how long a circuit stays open before the next check moves it to half-open
	// (--cb-timeout-duration-secs, default 60 s).
	Timeout time.Duration
	// Window is accepted and validated for SMG compatibility but unused
	// (--cb-window-duration-secs, default 120 s).
	Window time.Duration
	// Disabled raises the failure threshold to MaxThreshold so that the circuit stays closed
	// (--disable-circuit-breaker, default false). Outcomes are still counted, and the hang rule
	// opens nothing either.
	Disabled bool
	// HangTimeout is the request timeout (--request-timeout-secs) by which the hang rule
	// (hang.go) judges that the worker answered nothing: it opens a closed circuit once
	// HangTimeouts requests got no answer within it while the worker answered no request at
	// all. 0 (the default of a Config built by hand) turns the rule off.
	HangTimeout time.Duration
}

// DefaultConfig returns the flag defaults, which are SMG's.
func DefaultConfig() Config {
	return Config{
		FailureThreshold: 10,
		SuccessThreshold: 3,
		Timeout:          60 * time.Second,
		Window:           120 * time.Second,
	}
}

// Validate reports the first invalid field as an error naming its flag: thresholds must be
// at least 1 and durations positive.
func (c Config) Validate() error {
	switch {
	case c.FailureThreshold < 1:
		return fmt.Errorf("--cb-failure-threshold must be >= 1, got %d", c.FailureThreshold)
	case c.SuccessThreshold < 1:
		return fmt.Errorf("--cb-success-threshold must be >= 1, got %d", c.SuccessThreshold)
	case c.Timeout <= 0:
		return fmt.Errorf("--cb-timeout-duration-secs must be > 0, got %v", c.Timeout.Seconds())
	case c.Window <= 0:
		return fmt.Errorf("--cb-window-duration-secs must be > 0, got %v", c.Window.Seconds())
	case c.HangTimeout < 0:
		return fmt.Errorf("--request-timeout-secs must be > 0, got %v", c.HangTimeout.Seconds())
	}
	return nil
}

// EffectiveFailureThreshold is the threshold the breaker applies: MaxThreshold when Disabled,
// else FailureThreshold.
func (c Config) EffectiveFailureThreshold() int {
	if c.Disabled {
		return MaxThreshold
	}
	return c.FailureThreshold
}

// Resolve returns the breaker config and outcome classifier of one worker: the flags' values,
// each replaced by the worker's override when r sets it. A worker's own cb_failure_threshold
// applies even when the flags disable the breaker (the result then has Disabled false). A
// status list the worker sets replaces the default list; it does not add to it. Overrides
// below their minimum are skipped (worker.Spec.Normalize rejects them before they get here),
// so a valid flags config always resolves to a valid config. r may be nil.
func Resolve(flags Config, r *worker.Resilience) (Config, Classifier) {
	c := flags
	if r == nil {
		return c, Classifier{}
	}
	if v := r.CBFailureThreshold; v != nil && *v >= 1 {
		c.FailureThreshold = *v
		c.Disabled = false
	}
	if v := r.CBSuccessThreshold; v != nil && *v >= 1 {
		c.SuccessThreshold = *v
	}
	if v := r.CBTimeoutSecs; v != nil && *v >= 1 {
		c.Timeout = time.Duration(*v) * time.Second
	}
	return c, NewClassifier(r.CapacityStatusCodes, r.RetryableStatusCodes)
}
