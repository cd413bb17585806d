package prefixindex

import (
	"time"
)

// Due reports whether an eviction should run at now: EvictionInterval has passed since the
// last one, or a model passed twice MaxChars. A true answer claims the run: until Evict ends
// it, Due answers false. The interval counts from the first call.
func (x *Index) Due(now time.Time) bool {
	if x.evicting.Load() {
		return false
	}
	due := x.overCap.Load()
	if !due && x.cfg.EvictionInterval > 0 {
		t, last := now.UnixNano(), x.lastEvict.Load()
		if last == 0 {
			x.lastEvict.CompareAndSwap(0, t)
			return false
		}
		due = t-last >= int64(x.cfg.EvictionInterval)
	}
	return due && x.evicting.CompareAndSwap(false, true)
}

// Evict brings every model back to at most MaxChars, evicting the least recently used blocks
// first, whichever worker's they are, and ends the run Due claimed. A model's read lock is held
// while its blocks' uses are copied, and its lock while one entry's blocks are removed.
func (x *Index) Evict(now time.Time) {
	defer x.evicting.Store(false)
	x.lastEvict.Store(now.UnixNano())
	x.overCap.Store(false)
	for _, m := range x.modelList() {
		m.evict(x.cfg.MaxChars, x.cfg.OnEvict)
	}
}

// use is one block's last use and length, for the selection of the cut.
type use struct {
	last int64
	n    int64
}

// evict removes the blocks used at or before the cut, one worker's entry at a time, so that
// requests wait for at most one entry's pass; onEvict, when set, hears of each entry's removals.
func (m *Model) evict(maxChars int64, onEvict func(string, Worker, []BlockUse)) {
	cut, ok := m.cutoff(maxChars)
	if !ok {
		return
	}
	m.mu.RLock()
	workers := make([]Worker, 0, len(m.workers))
	for w := range m.workers {
		workers = append(workers, w)
	}
	m.mu.RUnlock()
	var gone []BlockUse
	for _, w := range workers {
		m.mu.Lock()
		if e := m.workers[w]; e != nil {
			gone = m.evictLocked(w, e, cut, gone[:0], onEvict != nil)
		}
		m.mu.Unlock()
		if len(gone) > 0 {
			onEvict(m.name, w, gone)
		}
	}
}

// evictLocked removes e's blocks used at or before cut, appending them to gone when report.
func (m *Model) evictLocked(w Worker, e *entry, cut int64, gone []BlockUse, report bool) []BlockUse {
	for h, last := range e.blocks {
		if last <= cut {
			m.dropLocked(e, h)
			if report {
				gone = append(gone, BlockUse{Hash: h, Last: cut})
			}
		}
	}
	switch {
	case len(e.blocks) == 0:
		delete(m.workers, w)
	case len(e.blocks) < e.peak/4:
		e.blocks = compacted(e.blocks) // a Go map keeps its peak's memory: shed it
		e.peak = len(e.blocks)
	}
	return gone
}

// cutoff returns the last use at and below which blocks go so that the model holds at most
// maxChars; false when it does already. The blocks' uses are copied under the read lock, and
// the cut is found among them without it.
func (m *Model) cutoff(maxChars int64) (int64, bool) {
	m.mu.RLock()
	excess := m.size - maxChars
	if excess <= 0 {
		m.mu.RUnlock()
		return 0, false
	}
	uses := make([]use, 0, m.blocks)
	for _, e := range m.workers {
		for h, last := range e.blocks {
			uses = append(uses, use{last, int64(BlockLen(h))})
		}
	}
	m.mu.RUnlock()
	return cutAt(uses, excess), true
}

// cutAt returns the smallest last use such that the blocks used at or before it weigh at
// least want (the last use of all when they weigh less): a selection in expected linear time,
// which reorders us.
func cutAt(us []use, want int64) int64 {
	var cut int64
	for len(us) > 0 {
		pivot := us[len(us)/2].last
		// Three-way partition: us[:lt] before the pivot, us[lt:gt] at it, us[gt:] after.
		lt, i, gt := 0, 0, len(us)
		for i < gt {
			switch {
			case us[i].last < pivot:
				us[lt], us[i] = us[i], us[lt]
				lt++
				i++
			case us[i].last > pivot:
				gt--
				us[gt], us[i] = us[i], us[gt]
			default:
				i++
			}
		}
		var before, at int64
		for _, u := range us[:lt] {
			before += u.n
		}
		for _, u := range us[lt:gt] {
			at += u.n
		}
		switch {
		case before >= want:
			us = us[:lt]
		case before+at >= want:
			return pivot
		default:
			want -= before + at
			cut = pivot
			us = us[gt:]
		}
	}
	return cut
}

// dropLocked removes block h from e.
func (m *Model) dropLocked(e *entry, h uint64) {
	n := int64(BlockLen(h))
	delete(e.blocks, h)
	e.size -= n
	m.size -= n
	m.blocks--
}

// compacted copies a map into one sized for what it holds now.
func compacted(src map[uint64]int64) map[uint64]int64 {
	dst := make(map[uint64]int64, len(src))
	for k, v := range src {
		dst[k] = v
	}
	return dst
}
