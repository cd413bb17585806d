package owned

import (
	"errors"
	"runtime/debug"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// onTransition is the Checker's OnTransition: a promotion tells the breaker (before the worker
// becomes routable again), then the pool learns the new state, then a worker that declares no
// model is asked which it serves (in the background).
func (m *Manager) onTransition(id worker.ID, from, to health.State, promotion bool) {
	ow := m.get(id)
	if ow == nil {
		return
	}
	ow.trans.add("health", from.String(), to.String())
	if to != health.Pending {
		ow.fresh.Store(false)
	}
	if promotion {
		ow.c.b.Promote()
	}
	m.syncHealth(ow)
	m.changed(id)
	if promotion {
		m.discover(ow)
	}
}

// syncHealth writes the worker's current health state to the pool: the Checker's state, or
// pending while quarantined. It reads the state at the moment of writing, under healthMu, so
// that whichever call writes last writes the latest state, whatever order callbacks and Own run
// in.
func (m *Manager) syncHealth(ow *ownedWorker) {
	m.healthMu.Lock()
	defer m.healthMu.Unlock()
	m.mu.Lock()
	current, dead := m.owned[ow.id] == ow, ow.dead
	m.mu.Unlock()
	if !current {
		return // forgotten meanwhile: the pool's worker is no longer ours to set
	}
	h := health.Pending
	if st, ok := m.checker.Status(ow.id); ok {
		h = st.State
	} else if !dead {
		return // dropped by the Checker: onRemove takes it from here
	}
	if _, err := m.pool.SetHealth(ow.id, h); err != nil && !errors.Is(err, pool.ErrNotFound) {
		m.log.Warn("cannot set a worker's health in the pool", "worker", ow.label, "err", err)
	}
}

// onRemove is the Checker's OnRemove (and Drain's, for a quarantined worker): the manager
// forgets the worker, then the owner removes it: through Options.OnRemove, called in its own
// goroutine so that it may call the Manager back, or from the pool directly.
func (m *Manager) onRemove(id worker.ID, reason health.RemoveReason) {
	m.mu.Lock()
	var epoch uint64
	if ow := m.owned[id]; ow != nil {
		epoch = ow.epoch
	}
	m.mu.Unlock()
	ow := m.forget(id)
	if ow == nil {
		return
	}
	if f := m.opts.OnRemove; f != nil {
		go m.safely("OnRemove", func() { f(id, epoch, reason.String()) })
		return
	}
	if err := m.pool.Remove(id); err != nil && !errors.Is(err, pool.ErrNotFound) {
		m.log.Warn("cannot remove a worker from the pool", "worker", ow.label, "err", err)
		return
	}
	m.log.Info("worker removed from the pool", "worker", ow.label, "id", string(id), "reason", reason.String())
}

// safely runs f, logging a panic with its stack instead of crashing the gateway.
func (m *Manager) safely(what string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			m.log.Error("panic recovered", "in", what, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	f()
}
