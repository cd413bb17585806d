package health

import "time"

// Clock is the Checker's source of time. The zero Options use the real clock, which
// testing/synctest fakes; a test may pass its own.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d and returns a function that cancels the
	// call, reporting whether it did so before f started.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
