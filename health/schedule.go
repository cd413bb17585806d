package health

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"time"
)

// schedule is a min-heap of probed workers by their next turn. One clock timer, armed for the
// head, drives every worker: no goroutine or ticker per worker.
type schedule []*entry

func (s schedule) Len() int           { return len(s) }
func (s schedule) Less(i, j int) bool { return s[i].due.Before(s[j].due) }
func (s schedule) Swap(i, j int) {
	s[i], s[j] = s[j], s[i]
	s[i].index, s[j].index = i, j
}
func (s *schedule) Push(x any) {
	e := x.(*entry)
	e.index = len(*s)
	*s = append(*s, e)
}
func (s *schedule) Pop() any {
	old := *s
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*s = old[:len(old)-1]
	e.index = -1
	return e
}

// set (re)schedules e at due.
func (s *schedule) set(e *entry, due time.Time) {
	e.due = due
	if e.index >= 0 {
		heap.Fix(s, e.index)
		return
	}
	heap.Push(s, e)
}

// remove unschedules e if it is scheduled.
func (s *schedule) remove(e *entry) {
	if e.index >= 0 {
		heap.Remove(s, e.index)
	}
}

// arm makes sure the timer fires no later than the head's turn.
func (c *Checker) arm(now time.Time) {
	if len(c.sched) == 0 || c.closed {
		return
	}
	due := c.sched[0].due
	if c.timer != nil && !c.timerAt.After(due) {
		return // an earlier (or the same) wake is already armed
	}
	if c.timer != nil {
		c.timer()
	}
	c.timerAt = due
	c.timer = c.clock.AfterFunc(due.Sub(now), c.dispatch)
}

// dispatch starts the probes whose turn has come and re-arms the timer. It runs in the clock's
// timer goroutine.
func (c *Checker) dispatch() {
	defer c.recoverLog("health dispatch")
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	now := c.clock.Now()
	if !c.timerAt.After(now) {
		c.timer = nil // this is the armed timer firing (or a later one will)
	}
	for len(c.sched) > 0 && !c.sched[0].due.After(now) {
		e := c.sched[0]
		c.sched.set(e, nextTurn(e.anchor, now, e.set.Interval))
		c.start(e)
	}
	c.arm(now)
}

// start begins a probe of e now, or queues it when MaxInFlight probes run. A worker whose probe
// is still in flight (or queued) is not started twice: this turn is skipped.
func (c *Checker) start(e *entry) {
	if e.running || e.queued {
		return
	}
	if c.running >= c.max {
		e.queued = true
		c.backlog = append(c.backlog, e)
		return
	}
	c.running++
	e.running = true
	c.wg.Add(1)
	go c.probeLoop(e, e.target, e.mode.Prober)
}

// probeLoop runs e's probe, then keeps the slot busy with the backlog until it is empty.
func (c *Checker) probeLoop(e *entry, t Target, p Prober) {
	defer c.wg.Done()
	defer c.recoverLog("health probe loop")
	for e != nil {
		err := c.probeOnce(p, t)
		e, t, p = c.finish(e, err)
	}
}

// probeOnce runs one probe bounded by t.Timeout on the Checker's clock.
func (c *Checker) probeOnce(p Prober, t Target) (err error) {
	ctx, cancel := context.WithCancelCause(c.ctx)
	defer cancel(nil)
	stop := c.clock.AfterFunc(t.Timeout, func() { cancel(ErrTimeout) })
	defer stop()
	defer func() {
		if r := recover(); r != nil {
			c.logPanic("health probe", r)
			err = &ProbeError{Reason: fmt.Sprintf("prober panicked: %v", r)}
		}
	}()
	err = p.Probe(ctx, t)
	if err != nil && errors.Is(context.Cause(ctx), ErrTimeout) {
		var pe *ProbeError
		if !errors.As(err, &pe) || pe.Reason != "timeout" {
			err = &ProbeError{Reason: "timeout", Err: ErrTimeout}
		}
	}
	return err
}

// finish records the result of e's probe and hands the slot to the next queued worker, which it
// returns (nil when none waits).
func (c *Checker) finish(e *entry, err error) (next *entry, t Target, p Prober) {
	defer c.flush()
	c.mu.Lock()
	defer c.mu.Unlock()
	e.running = false
	c.record(e, err)
	for next == nil && len(c.backlog) > 0 {
		n := c.backlog[0]
		c.backlog[0] = nil
		c.backlog = c.backlog[1:]
		n.queued = false
		if !n.gone && !c.closed && n.m.State() != Draining && c.probed(n) {
			next = n
		}
	}
	if len(c.backlog) == 0 {
		c.backlog = nil
	}
	if next == nil {
		c.running--
		return nil, Target{}, nil
	}
	next.running = true
	return next, next.target, next.mode.Prober
}

// record applies a probe result to e: metrics, last error, 429 backoff, state machine.
func (c *Checker) record(e *entry, err error) {
	if e.gone || c.closed || e.m.State() == Draining || !c.probed(e) {
		return
	}
	e.lastProbe = c.clock.Now()
	throttled := errors.Is(err, ErrThrottled)
	ok := err == nil || throttled
	c.met.checked(e.target.Mode, ok)
	prevErr, prevCode := e.lastErr, e.lastCode
	if !ok {
		e.throttled = 0
		e.lastErr, e.lastCode = describe(err, e.target.APIKey)
		c.log.Debug("health probe failed", "worker", e.label, "error", e.lastErr, "status", e.lastCode)
		c.applyProbe(e, Failure, e.lastErr, prevErr != e.lastErr || prevCode != e.lastCode)
		return
	}
	e.lastErr, e.lastCode = "", 0
	if throttled {
		e.throttled++
		c.backOff(e)
	} else {
		e.throttled = 0
	}
	c.log.Debug("health probe passed", "worker", e.label, "throttled", throttled)
	c.applyProbe(e, Success, "probe passed", prevErr != "" || prevCode != 0)
}

// applyProbe applies a probe's event and, when the probe changed the last error or status
// without a state change, queues OnProbeChange (a state change's OnTransition covers it).
func (c *Checker) applyProbe(e *entry, ev Event, reason string, described bool) {
	tr := e.m.Apply(ev)
	if tr.Changed() {
		c.changed(e, tr, reason)
		return
	}
	if f := c.opts.OnProbeChange; described && f != nil {
		id := e.id
		c.pending = append(c.pending, func() { f(id) })
	}
}

// backOff pushes e's next turn back by 1, 2, 4, then 8 sweeps after consecutive 429s.
func (c *Checker) backOff(e *entry) {
	if e.index < 0 {
		return
	}
	now := c.clock.Now()
	due := nextTurn(e.anchor, now, e.set.Interval).Add(time.Duration(backoffSweeps(e.throttled)) * e.set.Interval)
	c.sched.set(e, due)
	c.arm(now)
}
