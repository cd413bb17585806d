package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/breaker"
)

// breakerFlags are the circuit breakers of the workers this gateway owns (DESIGN.md section 7).
type breakerFlags struct {
	failureThreshold int
	successThreshold int
	timeoutSecs      int
	windowSecs       int
	disabled         bool
}

func (f *breakerFlags) register(fs *pflag.FlagSet) {
	d := breaker.DefaultConfig()
	fs.IntVar(&f.failureThreshold, "cb-failure-threshold", d.FailureThreshold, "consecutive failed requests that open a worker's circuit")
	fs.IntVar(&f.successThreshold, "cb-success-threshold", d.SuccessThreshold, "consecutive successes that close a half-open circuit")
	fs.IntVar(&f.timeoutSecs, "cb-timeout-duration-secs", int(d.Timeout/time.Second), "seconds an open circuit waits before it lets requests try again (half-open)")
	fs.IntVar(&f.windowSecs, "cb-window-duration-secs", int(d.Window/time.Second), "accepted for SMG compatibility and validated, but unused")
	fs.BoolVar(&f.disabled, "disable-circuit-breaker", false, "keep circuits closed (outcomes are still counted; a worker's own cb_failure_threshold still applies)")
}

func (f *breakerFlags) validate() error {
	for _, e := range []error{
		checkMin("cb-failure-threshold", f.failureThreshold, 1),
		checkMin("cb-success-threshold", f.successThreshold, 1),
		checkSecs("cb-timeout-duration-secs", f.timeoutSecs, 1),
		checkSecs("cb-window-duration-secs", f.windowSecs, 1),
	} {
		if e != nil {
			return e
		}
	}
	return nil
}

func (f *breakerFlags) config() breaker.Config {
	return breaker.Config{
		FailureThreshold: f.failureThreshold,
		SuccessThreshold: f.successThreshold,
		Timeout:          time.Duration(f.timeoutSecs) * time.Second,
		Window:           time.Duration(f.windowSecs) * time.Second,
		Disabled:         f.disabled,
	}
}
