// Package testkit is what meshgw's tests share: waiting for a condition with a deadline,
// letting fake time pass inside a testing/synctest bubble, a quiet logger, raft timeouts
// short enough for a test, a membership whose peers a test sets, and a loopback address whose
// connections hang as over a cut link (UnansweredAddr).
//
// A test waits on a condition, never for time: For polls the condition on a short ticker until
// it holds or the deadline passes, so the ticker bounds only how late a condition is noticed,
// and a test whose condition holds takes no longer than it needs.
package testkit

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/test/proc"
)

// Deadline is how long For waits before it fails the test: far longer than any condition takes
// on a loaded two-core machine, so that reaching it means the condition will not hold.
const Deadline = 15 * time.Second

// poll is how often a condition is checked.
const poll = 2 * time.Millisecond

// For waits until cond holds, failing t after Deadline with what was awaited.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Deadline, what, cond)
}

// Within waits until cond holds, failing t after within with what was awaited.
func Within(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := Until(context.Background(), within, what, cond); err != nil {
		t.Fatal(err)
	}
}

// Until waits until cond holds, within at most, or ctx ends; it returns an error naming what
// was awaited when cond did not hold in time. It is For for harnesses that return errors
// (proc.Until, polled every 2 ms).
func Until(ctx context.Context, within time.Duration, what string, cond func() bool) error {
	return proc.Until(ctx, within, poll, what, cond)
}

// Advance moves a synctest bubble's fake clock d forward and lets every goroutine of the
// bubble settle. Inside a bubble time passes only when all its goroutines are blocked, so this
// takes no real time. Call it only inside synctest.Test.
func Advance(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}

// Quiet is a logger that drops every record.
func Quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// FastRaft shortens raft's timeouts as raft's own in-memory tests do, with some slack for a busy
// two-core machine.
func FastRaft(c *raft.Config) {
	c.HeartbeatTimeout = 100 * time.Millisecond
	c.ElectionTimeout = 100 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
}
