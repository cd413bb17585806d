package prefixindex

import (
	"cmp"
	"slices"
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
// first, whichever worker's they are, and ends the run Due claimed. A model's lock is held
// while its blocks are read and again while they are removed, not while they are sorted.
func (x *Index) Evict(now time.Time) {
	defer x.evicting.Store(false)
	x.lastEvict.Store(now.UnixNano())
	x.overCap.Store(false)
	for _, m := range x.modelList() {
		m.evict(x.cfg.MaxChars)
	}
}

// use is one block's last use and length, for sorting.
type use struct {
	last int64
	n    int64
}

func (m *Model) evict(maxChars int64) {
	cut, ok := m.cutoff(maxChars)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for w, e := range m.workers {
		for h, last := range e.blocks {
			if last <= cut {
				m.dropLocked(e, h)
			}
		}
		switch {
		case len(e.blocks) == 0:
			delete(m.workers, w)
		case len(e.blocks) < e.peak/4:
			e.blocks = compacted(e.blocks) // a Go map keeps its peak's memory: shed it
			e.peak = len(e.blocks)
		}
	}
}

// cutoff returns the last use at and below which blocks go so that the model holds at most
// maxChars; false when it does already.
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
	slices.SortFunc(uses, func(a, b use) int { return cmp.Compare(a.last, b.last) })
	var freed int64
	for _, u := range uses {
		freed += u.n
		if freed >= excess {
			return u.last, true
		}
	}
	if len(uses) == 0 {
		return 0, false
	}
	return uses[len(uses)-1].last, true
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
