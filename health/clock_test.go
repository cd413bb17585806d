package health

import (
	"container/heap"
	"sync"
	"time"
)

// manualClock is a Clock that moves only when Advance is called.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers timerHeap
}

type manualTimer struct {
	at      time.Time
	f       func()
	stopped bool
	fired   bool
}

func newManualClock() *manualClock { return &manualClock{now: time.Unix(1_700_000_000, 0)} }

func (m *manualClock) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

func (m *manualClock) AfterFunc(d time.Duration, f func()) func() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &manualTimer{at: m.now.Add(d), f: f}
	heap.Push(&m.timers, t)
	return func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		if t.fired || t.stopped {
			return false
		}
		t.stopped = true
		return true
	}
}

// Advance moves the clock by d and starts every timer due, each in its own goroutine.
func (m *manualClock) Advance(d time.Duration) {
	m.mu.Lock()
	m.now = m.now.Add(d)
	var due []func()
	for len(m.timers) > 0 && !m.timers[0].at.After(m.now) {
		t := heap.Pop(&m.timers).(*manualTimer)
		if !t.stopped {
			t.fired = true
			due = append(due, t.f)
		}
	}
	m.mu.Unlock()
	for _, f := range due {
		go f()
	}
}

type timerHeap []*manualTimer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(*manualTimer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
