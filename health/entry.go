package health

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// entry is one checked worker. Every field is guarded by Checker.mu.
type entry struct {
	id      worker.ID
	label   string // metric and log label: the worker URL
	target  Target
	set     Settings
	mode    Mode
	hasMode bool
	m       Machine
	// keylessLLMProbe is set while the worker names an llm_probe_model without an API key: it
	// was warned about once, and gets the free probe.
	keylessLLMProbe bool

	// Schedule: the worker's turns fall on anchor + k·interval.
	anchor  time.Time
	due     time.Time
	index   int  // position in the schedule heap, -1 when not scheduled
	running bool // a probe is in flight: a turn that comes meanwhile is skipped
	queued  bool // waiting in the backlog for a free probe slot
	// throttled counts consecutive 429 answers (external providers back off).
	throttled int

	lastErr   string
	lastCode  int
	lastProbe time.Time

	settle     time.Duration
	stopSettle func() bool
	gone       bool // dropped: late probe results and timers are ignored
}

// configure sets e's settings, target and prober from spec.
func (c *Checker) configure(e *entry, spec *worker.Spec) {
	e.set = c.cfg.Merge(spec.ConnectionMode, spec.Health)
	e.mode, e.hasMode = c.opts.Modes[spec.ConnectionMode]
	e.hasMode = e.hasMode && e.mode.Prober != nil
	e.target = Target{
		ID: e.id, URL: spec.URL, Mode: spec.ConnectionMode, Provider: spec.Provider,
		APIKey: spec.APIKey, Endpoint: c.cfg.Endpoint, Timeout: e.set.Timeout,
		LLMProbeModel: e.set.LLMProbeModel, GatewayID: c.opts.NodeID,
	}
	if spec.ConnectionMode == worker.ModeGRPC {
		e.target.Service = c.opts.GRPCService
	}
	keyless := e.target.LLMProbeModel != "" && e.target.APIKey == ""
	if keyless {
		// An unauthenticated completion would measure only the provider's refusal (Rolter).
		e.target.LLMProbeModel = ""
		keyless = !e.set.Disabled // warn only about probes that run
		if keyless && !e.keylessLLMProbe {
			c.log.Warn("health.llm_probe_model is set but the worker has no api_key: probing with the free probe (GET /v1/models) instead",
				"worker", e.label, "id", string(e.id), "llm_probe_model", e.set.LLMProbeModel)
		}
	}
	e.keylessLLMProbe = keyless
}

// probed reports whether e is probed at all (draining aside).
func (c *Checker) probed(e *entry) bool {
	return e.hasMode && (!e.set.Disabled || e.mode.ProbeWhenDisabled)
}

// reconcile puts e's schedule and state in line with its settings after Add or Update.
// reanchor restarts the turns of a probed worker whose interval changed.
func (c *Checker) reconcile(e *entry, reanchor bool) {
	if e.m.State() == Draining {
		return
	}
	if !c.probed(e) {
		c.sched.remove(e)
		if e.set.Disabled {
			c.apply(e, ChecksOff, "health checks disabled")
		}
		return
	}
	now := c.clock.Now()
	if e.index < 0 {
		// Newly probed: probe at once, then on the worker's own turns.
		c.setAnchor(e, now)
		c.start(e)
		c.sched.set(e, nextTurn(e.anchor, now, e.set.Interval))
		c.arm(now)
		return
	}
	if reanchor {
		c.setAnchor(e, now)
		c.sched.set(e, nextTurn(e.anchor, now, e.set.Interval))
		c.arm(now)
	}
}

// setAnchor fixes where e's turns fall: from now for an engine; for an external provider on a
// grid shared by every gateway, shifted by the provider's stable jitter offset.
func (c *Checker) setAnchor(e *entry, now time.Time) {
	if e.target.Mode != worker.ModeExternal {
		e.anchor = now
		return
	}
	e.anchor = time.Unix(0, 0).Add(JitterOffset(e.id, e.set.Interval))
}

// nextTurn is the first anchor + k·interval strictly after now.
func nextTurn(anchor, now time.Time, interval time.Duration) time.Time {
	if interval <= 0 {
		interval = time.Second
	}
	if now.Before(anchor) {
		return anchor
	}
	k := now.Sub(anchor)/interval + 1
	return anchor.Add(k * interval)
}

// apply feeds ev to e's machine and fires the side effects of a real change.
func (c *Checker) apply(e *entry, ev Event, reason string) {
	if tr := e.m.Apply(ev); tr.Changed() {
		c.changed(e, tr, reason)
	}
}

// changed logs and publishes a state change, queues OnTransition, and removes a failed worker
// when auto-removal is on.
func (c *Checker) changed(e *entry, tr Transition, reason string) {
	c.met.setState(e.label, tr.To)
	level := slog.LevelInfo
	if tr.To == NotReady || tr.To == Failed {
		level = slog.LevelWarn
	}
	c.log.Log(context.Background(), level, "worker health changed", "worker", e.label, "id", e.id,
		"from", tr.From.String(), "to", tr.To.String(), "reason", reason, "status", e.lastCode)
	if f := c.opts.OnTransition; f != nil {
		id := e.id
		c.pending = append(c.pending, func() { f(id, tr.From, tr.To, tr.Promotion) })
	}
	if tr.To == Failed && c.cfg.RemoveUnhealthyWorkers {
		c.drop(e, RemovedFailed)
	}
}

// forgetter is implemented by probers that hold per-worker resources (the gRPC prober's
// connections).
type forgetter interface {
	Forget(id worker.ID)
}

// drop forgets e: no more probes, its gauge reads -1, and OnRemove is queued when the Checker
// removed it on its own (reason != 0).
func (c *Checker) drop(e *entry, reason RemoveReason) {
	e.gone = true
	delete(c.workers, e.id)
	c.sched.remove(e)
	if e.stopSettle != nil {
		e.stopSettle()
	}
	c.met.removed(e.label)
	id := e.id
	if f, ok := e.mode.Prober.(forgetter); ok {
		c.pending = append(c.pending, func() { f.Forget(id) })
	}
	if reason == 0 {
		c.log.Debug("worker no longer checked", "worker", e.label, "id", id)
		return
	}
	c.log.Info("worker removed by health", "worker", e.label, "id", id, "reason", reason.String())
	if f := c.opts.OnRemove; f != nil {
		c.pending = append(c.pending, func() { f(id, reason) })
	}
}

// flush delivers the queued callbacks in order, outside c.mu. A callback that calls back into
// the Checker queues more; they are delivered by whoever holds c.notify, after it returns.
func (c *Checker) flush() {
	for {
		if !c.notify.TryLock() {
			return // the holder delivers ours too
		}
		c.mu.Lock()
		batch := c.pending
		c.pending = nil
		c.mu.Unlock()
		for _, f := range batch {
			c.deliver(f)
		}
		c.notify.Unlock()
		c.mu.Lock()
		more := len(c.pending) > 0
		c.mu.Unlock()
		if !more {
			return
		}
	}
}

func (c *Checker) deliver(f func()) {
	defer c.recoverLog("health callback")
	f()
}

func (c *Checker) recoverLog(what string) {
	if r := recover(); r != nil {
		c.logPanic(what, r)
	}
}

func (c *Checker) logPanic(what string, r any) {
	c.log.Error("panic recovered", "in", what, "panic", r, "stack", string(debug.Stack()))
}

// describe turns a probe error into last_error and last_status_code, with the API key (should a
// prober ever echo it) redacted and the text bounded.
func describe(err error, key string) (string, int) {
	msg, code := err.Error(), 0
	var pe *ProbeError
	if errors.As(err, &pe) {
		msg, code = pe.Reason, pe.StatusCode
	}
	if key != "" {
		msg = strings.ReplaceAll(msg, key, "[redacted]")
	}
	if len(msg) > 256 {
		msg = msg[:256]
	}
	return msg, code
}
