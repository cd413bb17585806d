package gateway

import (
	"math"
	"math/rand/v2"
	"time"
)

// backoff returns the wait after the given failed attempt (1-based): InitialBackoff ×
// Multiplier^(attempt-1), capped at MaxBackoff, then spread by ±Jitter using u in [0, 1).
func backoff(r RetryConfig, attempt int, u float64) time.Duration {
	d := float64(r.InitialBackoff) * math.Pow(r.Multiplier, float64(attempt-1))
	d = min(d, float64(r.MaxBackoff))
	if r.Jitter > 0 {
		d *= 1 + r.Jitter*(2*u-1)
	}
	return time.Duration(d)
}

func randFloat() float64 { return rand.Float64() }
