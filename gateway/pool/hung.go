package pool

import (
	"time"

	"github.com/meshgw/meshgw/worker"
)

// DefaultHungHold is how long HoldHung keeps a worker out of this gateway's routing when no
// change of its health or breaker verdict ends the hold first.
const DefaultHungHold = 30 * time.Second

// hungHold is one worker's hold: its timer, and its number, so that a timer of an earlier hold
// that fires late releases nothing.
type hungHold struct {
	timer *time.Timer
	n     uint64
}

// HoldHung closes the worker's GateHung, taking it out of this gateway's routing at once (a
// snapshot swap), for d or until ReleaseHung, or a change of its health state (SetHealth), ends
// the hold, whichever comes first. The data plane calls it when a request to the worker got no
// answer within the request timeout: the next request goes elsewhere instead of waiting out the
// same timeout. It reports whether a hold started: false when the worker is held already (the
// first hold's deadline stands) or not in the pool. The path it adds to routing is the gate
// word Candidates reads anyway.
func (p *Pool) HoldHung(id worker.ID, d time.Duration) bool {
	p.mu.Lock()
	w := p.workers[id]
	if w == nil || !w.setGate(GateHung, true) {
		p.mu.Unlock()
		return false
	}
	p.holdN++
	n := p.holdN
	if p.holds == nil {
		p.holds = make(map[worker.ID]hungHold)
	}
	p.holds[id] = hungHold{timer: time.AfterFunc(d, func() { p.releaseHold(id, n) }), n: n}
	p.flipped[id] = struct{}{}
	published := p.rebuildLocked()
	p.mu.Unlock()
	p.changedIf(published)
	return true
}

// ReleaseHung ends the worker's hold (HoldHung), if it has one: the owner's verdict on it
// changed (a bulletin brought another breaker state), which now decides. It reports whether a
// hold ended.
func (p *Pool) ReleaseHung(id worker.ID) bool {
	flipped, _ := p.mutate(id, func(w *Worker) bool { return p.endHoldLocked(w) })
	return flipped
}

// releaseHold is the timer of hold n: it ends the hold unless another one replaced it.
func (p *Pool) releaseHold(id worker.ID, n uint64) {
	_, _ = p.mutate(id, func(w *Worker) bool {
		if h, ok := p.holds[id]; !ok || h.n != n {
			return false
		}
		return p.endHoldLocked(w)
	})
}

// endHoldLocked opens w's GateHung and stops its timer; it reports whether the gate flipped.
func (p *Pool) endHoldLocked(w *Worker) bool {
	if h, ok := p.holds[w.ID]; ok {
		h.timer.Stop()
		delete(p.holds, w.ID)
	}
	return w.setGate(GateHung, false)
}
