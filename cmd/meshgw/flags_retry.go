package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/gateway"
)

// retryFlags are SMG's retry flags.
type retryFlags struct {
	maxRetries     int
	initialBackoff int
	maxBackoff     int
	multiplier     float64
	jitter         float64
	disabled       bool
}

func (f *retryFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.maxRetries, "retry-max-retries", gateway.DefaultMaxAttempts, "attempts per request in total, each on a freshly selected worker")
	fs.IntVar(&f.initialBackoff, "retry-initial-backoff-ms", int(gateway.DefaultInitialBackoff/time.Millisecond), "wait before the first retry, in ms")
	fs.IntVar(&f.maxBackoff, "retry-max-backoff-ms", int(gateway.DefaultMaxBackoff/time.Millisecond), "longest wait between attempts, in ms")
	fs.Float64Var(&f.multiplier, "retry-backoff-multiplier", gateway.DefaultMultiplier, "growth of the wait per attempt")
	fs.Float64Var(&f.jitter, "retry-jitter-factor", gateway.DefaultJitter, "random spread of each wait, as a fraction of it (0-1)")
	fs.BoolVar(&f.disabled, "disable-retries", false, "make every request a single attempt")
}

func (f *retryFlags) validate() error {
	for _, e := range []error{
		checkMin("retry-max-retries", f.maxRetries, 1),
		checkMin("retry-initial-backoff-ms", f.initialBackoff, 1),
		checkMin("retry-max-backoff-ms", f.maxBackoff, 1),
	} {
		if e != nil {
			return e
		}
	}
	if f.maxBackoff < f.initialBackoff {
		return valuef("retry-max-backoff-ms", "%d is below --retry-initial-backoff-ms %d", f.maxBackoff, f.initialBackoff)
	}
	if !(f.multiplier >= 1) {
		return valuef("retry-backoff-multiplier", "%v is below the minimum 1", f.multiplier)
	}
	if !(f.jitter >= 0 && f.jitter <= 1) {
		return valuef("retry-jitter-factor", "%v is not in 0-1", f.jitter)
	}
	return nil
}

func (f *retryFlags) config() gateway.RetryConfig {
	jitter := f.jitter
	if jitter == 0 {
		jitter = -1 // the Config's zero means the default; a flag of 0 means none
	}
	return gateway.RetryConfig{
		MaxAttempts:    f.maxRetries,
		InitialBackoff: time.Duration(f.initialBackoff) * time.Millisecond,
		MaxBackoff:     time.Duration(f.maxBackoff) * time.Millisecond,
		Multiplier:     f.multiplier,
		Jitter:         jitter,
		Disabled:       f.disabled,
	}
}
