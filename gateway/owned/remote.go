package owned

import (
	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/worker"
)

// RecordRemote records n outcomes o, classified by another gateway that proxied requests to an
// owned worker (an outcome report, DESIGN.md section 4), on the worker's breaker, in order, as
// OnOutcome records this gateway's own. It returns false, recording nothing, when the worker is
// not owned here, epoch is not the one given to Own (a report fenced off by a newer or older
// ownership), or the manager is closed. Ignored outcomes and n < 1 record nothing.
func (m *Manager) RecordRemote(id worker.ID, epoch uint64, o breaker.Outcome, n int) bool {
	m.mu.Lock()
	ow, closed := m.owned[id], m.closed
	owns := ow != nil && !closed && ow.epoch == epoch
	m.mu.Unlock()
	if !owns {
		return false
	}
	if o != breaker.Success && o != breaker.Failure && o != breaker.TimedOut {
		return true
	}
	for range n {
		ow.c.b.Record(o)
	}
	return true
}
