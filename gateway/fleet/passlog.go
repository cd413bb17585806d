package fleet

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// bulkLines is the most per-worker lines one reconcile pass logs at INFO. A pass with more
// changes (a failover moving thousands of workers, a gateway catching up after a long absence)
// logs one summary line instead, and each change at debug level, so that a bulk pass costs a
// line rather than one per worker.
const bulkLines = 10

// bulkExamples is how many worker ids the summary line of a bulk pass names.
const bulkExamples = 3

// passLog collects the per-worker lines of one reconcile pass. Until more than bulkLines are
// logged it keeps them; flush writes them at INFO, or, for a bulk pass, a summary line with a
// count per kind of change. The zero value is not usable: see newPassLog.
type passLog struct {
	log   *slog.Logger
	debug bool
	held  []heldLine
	kinds map[string]int
	ids   []string
	n     int
}

type heldLine struct {
	msg   string
	attrs []any
}

func newPassLog(log *slog.Logger) *passLog {
	return &passLog{log: log, debug: log.Enabled(context.Background(), slog.LevelDebug), kinds: map[string]int{}}
}

// add records one change of kind (a short name for the summary, such as "added") with its
// line.
func (p *passLog) add(kind, id, msg string, attrs ...any) {
	p.n++
	p.kinds[kind]++
	if len(p.ids) < bulkExamples {
		p.ids = append(p.ids, id)
	}
	if p.debug {
		p.log.Debug(msg, attrs...)
	}
	if p.n <= bulkLines {
		p.held = append(p.held, heldLine{msg, attrs})
	} else {
		p.held = nil
	}
}

// flush writes what the pass logged: each held line, or the summary of a bulk pass.
func (p *passLog) flush() {
	if p.n == 0 {
		return
	}
	if p.n <= bulkLines {
		for _, l := range p.held {
			p.log.Info(l.msg, l.attrs...)
		}
		return
	}
	attrs := []any{"changes", p.n}
	for _, k := range slices.Sorted(maps.Keys(p.kinds)) {
		attrs = append(attrs, k, p.kinds[k])
	}
	attrs = append(attrs, "for_example", p.ids)
	p.log.Info("applied a bulk of worker changes; each is logged at debug level", attrs...)
}

// lineBudget lets at most bulkLines lines a second through; the rest are counted, and one line
// says how many were held back once the second is over. It bounds the lines of changes that
// arrive one by one rather than in a pass (imported workers' states, when an owner's whole
// fleet changes at once). Its methods are safe for concurrent use.
type lineBudget struct {
	log *slog.Logger
	// what names the lines in the summary, e.g. "imported worker state changes".
	what string

	mu      sync.Mutex
	start   time.Time
	used    int
	skipped int
}

// lineWindow is lineBudget's window.
const lineWindow = time.Second

// allow reports whether the next line may be logged; when not, it is counted for the summary.
func (b *lineBudget) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if now.Sub(b.start) >= lineWindow && b.skipped == 0 {
		b.start, b.used = now, 0
	}
	if b.used < bulkLines && b.skipped == 0 {
		b.used++
		return true
	}
	if b.skipped == 0 {
		time.AfterFunc(b.start.Add(lineWindow).Sub(now), b.summarize)
	}
	b.skipped++
	return false
}

// summarize logs how many lines the window held back, and opens a new window.
func (b *lineBudget) summarize() {
	b.mu.Lock()
	n := b.skipped
	b.skipped, b.used, b.start = 0, 0, time.Now()
	b.mu.Unlock()
	if n > 0 {
		b.log.Info("more "+b.what+" than the log takes one by one; each is logged at debug level", "not_shown", n, "within", lineWindow)
	}
}
