package health

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/worker"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ptr[T any](v T) *T { return &v }

// engine is an HTTP engine spec on a loopback port that nothing dials (probers are fakes).
func engine(port int, h *worker.Health) worker.Spec {
	return worker.Spec{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Health: h}
}

func idOf(t testing.TB, s worker.Spec) worker.ID {
	t.Helper()
	s = s.Clone()
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	return s.ID()
}

// fakeProber records when each worker is probed and answers from a per-worker script.
type fakeProber struct {
	mu       sync.Mutex
	start    time.Time
	probes   map[worker.ID][]time.Duration
	results  map[worker.ID][]error // consumed in order; the last one repeats
	hang     map[worker.ID]bool    // block until the probe's context ends
	release  chan struct{}         // when set, every probe waits for it
	inflight int
	peak     int
}

func newFake() *fakeProber {
	return &fakeProber{start: time.Now(), probes: map[worker.ID][]time.Duration{},
		results: map[worker.ID][]error{}, hang: map[worker.ID]bool{}}
}

func (f *fakeProber) set(id worker.ID, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results[id] = errs
}

func (f *fakeProber) Probe(ctx context.Context, t Target) error {
	f.mu.Lock()
	f.probes[t.ID] = append(f.probes[t.ID], time.Since(f.start))
	f.inflight++
	f.peak = max(f.peak, f.inflight)
	var res error
	if q := f.results[t.ID]; len(q) > 0 {
		res = q[0]
		if len(q) > 1 {
			f.results[t.ID] = q[1:]
		}
	}
	hang, rel := f.hang[t.ID], f.release
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
	}()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	if rel != nil {
		select {
		case <-rel:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return res
}

func (f *fakeProber) times(id worker.ID) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.probes[id]...)
}

// recorder collects the Checker's callbacks with the time since start.
type recorder struct {
	mu      sync.Mutex
	start   time.Time
	trans   []trans
	removed []removal
}

type trans struct {
	ID        worker.ID
	From, To  State
	Promotion bool
	At        time.Duration
}

type removal struct {
	ID     worker.ID
	Reason RemoveReason
	At     time.Duration
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

func (r *recorder) onTransition(id worker.ID, from, to State, promo bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trans = append(r.trans, trans{id, from, to, promo, time.Since(r.start)})
}

func (r *recorder) onRemove(id worker.ID, reason RemoveReason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = append(r.removed, removal{id, reason, time.Since(r.start)})
}

func (r *recorder) transitions() []trans {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]trans(nil), r.trans...)
}

func (r *recorder) removals() []removal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]removal(nil), r.removed...)
}

type syncBuffer = logbuf.Buffer

func debugLogger(w *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newChecker starts a Checker with the fake prober for HTTP workers and closes it at cleanup.
func newChecker(t *testing.T, cfg Config, p Prober, rec *recorder, mut ...func(*Options)) *Checker {
	t.Helper()
	opts := Options{
		Config: cfg,
		Modes:  map[string]Mode{worker.ModeHTTP: {Prober: p}},
		Logger: slog.New(slog.DiscardHandler),
	}
	if rec != nil {
		opts.OnTransition, opts.OnRemove = rec.onTransition, rec.onRemove
	}
	for _, m := range mut {
		m(&opts)
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func secsList(ss ...float64) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = time.Duration(s * float64(time.Second))
	}
	return out
}
