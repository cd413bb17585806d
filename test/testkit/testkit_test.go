package testkit

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestUntil: a condition that comes to hold ends the wait; one that never does ends it at the
// deadline with an error naming what was awaited; a cancelled context ends it at once.
func TestUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		start := time.Now()
		if err := Until(context.Background(), time.Second, "three polls", func() bool { return n.Add(1) >= 3 }); err != nil {
			t.Fatalf("Until: %v", err)
		}
		if took := time.Since(start); took > 10*poll {
			t.Errorf("a condition true on the third poll took %v", took)
		}

		start = time.Now()
		err := Until(context.Background(), time.Second, "the impossible", func() bool { return false })
		if err == nil || !strings.Contains(err.Error(), "the impossible") {
			t.Fatalf("Until of a false condition: %v, want an error naming it", err)
		}
		if took := time.Since(start); took != time.Second {
			t.Errorf("a false condition failed after %v, want the deadline's 1s", took)
		}

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := Until(ctx, time.Hour, "never", func() bool { return false }); err == nil {
			t.Fatal("Until with a cancelled context returned nil")
		}
	})
}

// TestAdvance: Advance moves the bubble's clock by exactly d and lets a timer's goroutine run.
func TestAdvance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fired := make(chan struct{})
		time.AfterFunc(time.Minute, func() { close(fired) })
		Advance(time.Minute)
		select {
		case <-fired:
		default:
			t.Fatal("a timer of one minute did not fire after Advance(time.Minute)")
		}
		if got := time.Since(start); got != time.Minute {
			t.Errorf("Advance(time.Minute) moved the clock %v", got)
		}
	})
}
