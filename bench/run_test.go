package bench

import (
	"testing"
	"time"
)

// A full run's plain rows are 15 rounds of 2 s (pairs close in time, docs/performance.md
// "Method"); its streaming rows keep 5 rounds of 10 s.
func TestOptionsDefaultRounds(t *testing.T) {
	var o Options
	o.setDefaults()
	if o.Rounds != 15 || o.Duration != 2*time.Second || o.OneConnDuration != time.Second ||
		o.StreamRounds != 5 || o.StreamDuration != 10*time.Second {
		t.Errorf("plain %d × %v (one connection %v), streams %d × %v; want 15 × 2s (1s), 5 × 10s",
			o.Rounds, o.Duration, o.OneConnDuration, o.StreamRounds, o.StreamDuration)
	}
}
