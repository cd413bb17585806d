package fakeengine

import (
	"context"
	"sync"
)

// slots bounds how many requests an engine computes at once, as an engine's batch bounds its
// running requests; the others wait in arrival order. A freed slot goes to the longest waiter.
// The zero value (and a nil *slots) admits everyone at once.
type slots struct {
	mu      sync.Mutex
	free    int
	limit   int
	waiters []chan struct{} // closed when the slot is handed over
}

func newSlots(n int) *slots {
	if n <= 0 {
		return nil
	}
	return &slots{free: n, limit: n}
}

// acquire takes a slot, waiting behind earlier arrivals. It reports whether the request had to
// wait; it gives up when ctx ends or done is closed, and then holds no slot.
func (s *slots) acquire(ctx context.Context, done <-chan struct{}) (waited bool, err error) {
	if s == nil {
		return false, nil
	}
	s.mu.Lock()
	if s.free > 0 && len(s.waiters) == 0 {
		s.free--
		s.mu.Unlock()
		return false, nil
	}
	ch := make(chan struct{})
	s.waiters = append(s.waiters, ch)
	s.mu.Unlock()
	select {
	case <-ch:
		return true, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-done:
		err = ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, w := range s.waiters {
		if w == ch {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			return true, err
		}
	}
	// The slot was handed over while the request gave up: pass it on.
	s.releaseLocked()
	return true, err
}

// release frees a slot taken by acquire.
func (s *slots) release() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.releaseLocked()
	s.mu.Unlock()
}

func (s *slots) releaseLocked() {
	if len(s.waiters) > 0 {
		close(s.waiters[0])
		s.waiters = s.waiters[1:]
		return
	}
	s.free++
}

// load returns the slots in use and the requests waiting.
func (s *slots) load() (busy, waiting int) {
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit - s.free, len(s.waiters)
}
