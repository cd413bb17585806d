package gateway

import (
	"sync"
	"sync/atomic"
	"time"
)

// bodyBudget bounds the bytes of request bodies buffered at once, across every request in
// flight (--max-buffered-body-mb). While it has room, taking bytes is one compare-and-swap and
// giving them back one atomic add, so the common small-body path pays next to nothing. A request
// that finds it full waits, up to a bound, for other requests to give bytes back.
//
// Waiters are woken together whenever bytes come back and each tries again; they are not
// served in order, so a large body may wait out its bound while small ones pass. The bound
// keeps that short, and small bodies are a sliver of the budget.
type bodyBudget struct {
	max      int64
	used     atomic.Int64
	peak     atomic.Int64
	waiting  atomic.Int64 // requests waiting for room now
	refused  atomic.Int64 // requests refused after waiting out the bound
	streamed atomic.Int64 // bodies larger than the whole budget, streamed to the worker

	mu    sync.Mutex
	freed chan struct{} // closed, then replaced, when bytes come back while someone waits
}

func newBodyBudget(max int64) *bodyBudget {
	return &bodyBudget{max: max, freed: make(chan struct{})}
}

// tryTake takes n bytes if they fit now.
func (b *bodyBudget) tryTake(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			for p := b.peak.Load(); u+n > p && !b.peak.CompareAndSwap(p, u+n); p = b.peak.Load() {
			}
			return true
		}
	}
}

// take takes n bytes, waiting up to wait for them to fit; false when they did not (counted as
// a refusal). n must not exceed the whole budget.
func (b *bodyBudget) take(n int64, wait time.Duration) bool {
	if b.tryTake(n) {
		return true
	}
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		// Read the channel before trying: bytes given back after the try close this one.
		b.mu.Lock()
		freed := b.freed
		b.mu.Unlock()
		if b.tryTake(n) {
			return true
		}
		select {
		case <-freed:
		case <-timer.C:
			b.refused.Add(1)
			return false
		}
	}
}

// give returns n bytes taken earlier and wakes the waiters.
func (b *bodyBudget) give(n int64) {
	if n == 0 {
		return
	}
	b.used.Add(-n)
	if b.waiting.Load() > 0 {
		b.mu.Lock()
		close(b.freed)
		b.freed = make(chan struct{})
		b.mu.Unlock()
	}
}

// BodyBudgetStatus is the body budget block of GET /status.
type BodyBudgetStatus struct {
	BufferedBytes    int64 `json:"buffered_bytes"`
	MaxBufferedBytes int64 `json:"max_buffered_bytes"`
	PeakBytes        int64 `json:"peak_buffered_bytes"`
	Waiting          int64 `json:"waiting"`
	RefusedTotal     int64 `json:"refused_total"`
	StreamedTotal    int64 `json:"streamed_total"`
}

func (b *bodyBudget) status() BodyBudgetStatus {
	return BodyBudgetStatus{
		BufferedBytes: b.used.Load(), MaxBufferedBytes: b.max, PeakBytes: b.peak.Load(),
		Waiting: b.waiting.Load(), RefusedTotal: b.refused.Load(), StreamedTotal: b.streamed.Load(),
	}
}
