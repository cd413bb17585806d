package leader

import (
	"context"
	"sync"
	"time"
)

// Wake says why the skeleton called a duty's pass.
type Wake uint8

const (
	// Start: the first pass of the term.
	Start Wake = iota
	// Signal: one of the duty's signals fired (Term.Watch or Term.Also).
	Signal
	// Tick: Term.Interval passed.
	Tick
	// Timer: the time the last pass returned came.
	Timer
)

// String names the wake for the logs and the tests.
func (w Wake) String() string {
	switch w {
	case Start:
		return "start"
	case Signal:
		return "signal"
	case Tick:
		return "tick"
	case Timer:
		return "timer"
	}
	return "unknown"
}

// Duty is one of the leader's reconcile duties.
type Duty interface {
	// Term returns how the duty runs for one term of leadership. Run calls it once at the start
	// of each term, so that what a duty remembers within a term lives in what Term returns.
	Term() Term
}

// Term is how a duty runs for one term: what wakes it and what one pass does.
type Term struct {
	// Watch returns the signals that wake the duty and a function that stops them (a
	// membership's Watch). The sender must never block on them (signals coalesce). Nil means
	// none.
	Watch func() (<-chan struct{}, func())
	// Also is another signal that wakes the duty as Watch's do. Nil means none.
	Also <-chan struct{}
	// Interval is the period of the pass that backs up the signals. Required (> 0).
	Interval time.Duration
	// Pass does the duty's work for one wake and returns when it wants the next pass: the zero
	// time for none before the next signal or tick. A time already past wakes it at once.
	Pass func(ctx context.Context, w Wake) (next time.Time)
}

// Run runs duties side by side until ctx ends (the leadership is lost or the node shuts down),
// and returns once every one stopped.
func Run(ctx context.Context, duties ...Duty) {
	var wg sync.WaitGroup
	for _, d := range duties {
		wg.Go(func() { run(ctx, d.Term()) })
	}
	wg.Wait()
}

// run is the skeleton: a pass at the start, then one per signal, tick or timer until ctx ends.
func run(ctx context.Context, t Term) {
	if ctx.Err() != nil {
		return
	}
	var signals <-chan struct{} // nil, which never fires, without a Watch
	if t.Watch != nil {
		s, stop := t.Watch()
		defer stop()
		signals = s
	}
	tick := time.NewTicker(t.Interval)
	defer tick.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for w := Start; ; {
		next := t.Pass(ctx, w)
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-ctx.Done():
			return
		case <-signals:
			w = Signal
		case <-t.Also:
			w = Signal
		case <-tick.C:
			w = Tick
		case <-timer.C:
			w = Timer
		}
	}
}

// Loop is the leader's duties as consensus.Config.LeaderLoop runs them. It is set once, with
// Set, after consensus.Start returned the node the duties drive; a term that starts before
// then waits for it. The zero value is ready to use.
type Loop struct {
	once   sync.Once
	init   sync.Once
	set    chan struct{}
	duties []Duty // written once, before set is closed
}

func (l *Loop) ready() chan struct{} {
	l.init.Do(func() { l.set = make(chan struct{}) })
	return l.set
}

// Set gives the loop its duties. Only the first call counts.
func (l *Loop) Set(duties ...Duty) {
	l.once.Do(func() {
		l.duties = duties
		close(l.ready())
	})
}

// Run waits until the duties are set, then runs them (Run) until ctx ends. It returns at once
// when ctx ends first. It is meant as consensus.Config.LeaderLoop.
func (l *Loop) Run(ctx context.Context) {
	select {
	case <-l.ready():
	case <-ctx.Done():
		return
	}
	Run(ctx, l.duties...)
}
