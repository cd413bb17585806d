package breaker

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/worker"
)

// fakeClock is a manual clock, safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// recorder collects hook calls as readable strings.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

// count returns how many recorded events start with prefix.
func (r *recorder) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

func (r *recorder) hooks() Hooks {
	return Hooks{
		OnTransition:  func(from, to State) { r.add("transition %v->%v", from, to) },
		OnOutcome:     func(o Outcome) { r.add("outcome %v", o) },
		OnCounts:      func(f, s int) { r.add("counts %d %d", f, s) },
		OnReadmission: func() { r.add("readmission") },
		OnHang:        func() { r.add("hang") },
	}
}

// testConfig: open at 3 failures, close at 2 successes, 10 s timeout.
func testConfig() Config {
	return Config{FailureThreshold: 3, SuccessThreshold: 2, Timeout: 10 * time.Second, Window: time.Minute}
}

type fixture struct {
	b   *Breaker
	clk *fakeClock
	rec *recorder
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	f := &fixture{clk: newFakeClock(), rec: &recorder{}}
	f.b = New(cfg, Options{Clock: f.clk.Now, Hooks: f.rec.hooks()})
	return f
}

func (f *fixture) record(n int, o Outcome) {
	for range n {
		f.b.Record(o)
	}
}

// wantSnap checks state and counts.
func (f *fixture) wantSnap(t *testing.T, state State, failures, successes int) {
	t.Helper()
	s := f.b.Snapshot()
	if s.State != state || s.ConsecutiveFailures != failures || s.ConsecutiveSuccesses != successes {
		t.Fatalf("snapshot = %v f=%d s=%d, want %v f=%d s=%d",
			s.State, s.ConsecutiveFailures, s.ConsecutiveSuccesses, state, failures, successes)
	}
}

// Every (state, event) pair. The setups leave the breaker one event away from a transition:
// closed with 2 of 3 failures, open just now, half-open with 1 of 2 successes.
func TestStateEventTable(t *testing.T) {
	cfg := testConfig()
	setups := map[State]func(f *fixture){
		Closed: func(f *fixture) { f.record(2, Failure) },
		Open:   func(f *fixture) { f.record(3, Failure) },
		HalfOpen: func(f *fixture) {
			f.record(3, Failure)
			f.clk.Advance(cfg.Timeout)
			f.b.Allow()
			f.record(1, Success)
		},
	}
	type event func(f *fixture) (allowed bool)
	record := func(o Outcome) event { return func(f *fixture) bool { f.b.Record(o); return true } }
	allowAfter := func(d time.Duration) event {
		return func(f *fixture) bool { f.clk.Advance(d); return f.b.Allow() }
	}
	events := map[string]event{
		"success":              record(Success),
		"failure":              record(Failure),
		"timed-out":            record(TimedOut),
		"ignored":              record(Ignored),
		"allow-before-timeout": allowAfter(cfg.Timeout - time.Nanosecond),
		"allow-after-timeout":  allowAfter(cfg.Timeout),
		"promote":              func(f *fixture) bool { f.b.Promote(); return true },
	}
	tests := []struct {
		from      State
		event     string
		allowed   bool
		to        State
		failures  int
		successes int
		hooks     []string
	}{
		{Closed, "success", true, Closed, 0, 1, []string{"outcome success", "counts 0 1"}},
		{Closed, "failure", true, Open, 3, 0, []string{"transition closed->open", "outcome failure", "counts 3 0"}},
		{Closed, "timed-out", true, Open, 3, 0, []string{"transition closed->open", "outcome timed_out", "counts 3 0"}},
		{Closed, "ignored", true, Closed, 2, 0, nil},
		{Closed, "allow-before-timeout", true, Closed, 2, 0, nil},
		{Closed, "allow-after-timeout", true, Closed, 2, 0, nil},
		{Closed, "promote", true, Closed, 0, 0, []string{"counts 0 0"}},

		{Open, "success", true, Open, 0, 1, []string{"outcome success", "counts 0 1"}},
		{Open, "failure", true, Open, 4, 0, []string{"outcome failure", "counts 4 0"}},
		{Open, "timed-out", true, Open, 4, 0, []string{"outcome timed_out", "counts 4 0"}},
		{Open, "ignored", true, Open, 3, 0, nil},
		{Open, "allow-before-timeout", false, Open, 3, 0, nil},
		{Open, "allow-after-timeout", true, HalfOpen, 0, 0, []string{"transition open->half_open", "counts 0 0"}},
		{Open, "promote", true, HalfOpen, 0, 0, []string{"transition open->half_open", "readmission", "counts 0 0"}},

		{HalfOpen, "success", true, Closed, 0, 0, []string{"transition half_open->closed", "outcome success", "counts 0 0"}},
		{HalfOpen, "failure", true, Open, 1, 0, []string{"transition half_open->open", "outcome failure", "counts 1 0"}},
		{HalfOpen, "timed-out", true, Open, 1, 0, []string{"transition half_open->open", "outcome timed_out", "counts 1 0"}},
		{HalfOpen, "ignored", true, HalfOpen, 0, 1, nil},
		{HalfOpen, "allow-before-timeout", true, HalfOpen, 0, 1, nil},
		{HalfOpen, "allow-after-timeout", true, HalfOpen, 0, 1, nil},
		{HalfOpen, "promote", true, HalfOpen, 0, 1, nil},
	}
	if len(tests) != len(setups)*len(events) {
		t.Fatalf("table has %d rows, want every one of %d pairs", len(tests), len(setups)*len(events))
	}
	for _, tt := range tests {
		t.Run(tt.from.String()+"/"+tt.event, func(t *testing.T) {
			f := newFixture(t, cfg)
			setups[tt.from](f)
			if got := f.b.State(); got != tt.from {
				t.Fatalf("setup reached %v, want %v", got, tt.from)
			}
			f.rec.take()
			if got := events[tt.event](f); got != tt.allowed {
				t.Errorf("allowed = %v, want %v", got, tt.allowed)
			}
			f.wantSnap(t, tt.to, tt.failures, tt.successes)
			if diff := cmp.Diff(tt.hooks, f.rec.take()); diff != "" {
				t.Errorf("hooks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClosedOpensOnlyAtConsecutiveFailures(t *testing.T) {
	f := newFixture(t, testConfig())
	f.record(2, Failure)
	f.record(1, Success) // resets the count
	f.record(2, Failure)
	f.wantSnap(t, Closed, 2, 0)
	f.record(1, Ignored) // neither resets nor counts
	f.wantSnap(t, Closed, 2, 0)
	f.record(1, Failure)
	f.wantSnap(t, Open, 3, 0)
	if f.b.Allow() {
		t.Fatal("open circuit allowed a request")
	}
}

func TestTimeoutPath(t *testing.T) {
	cfg := testConfig()
	f := newFixture(t, cfg)
	t0 := f.clk.Now()
	f.record(3, Failure)
	if got := f.b.Snapshot().OpenedAt; !got.Equal(t0) {
		t.Fatalf("opened_at = %v, want %v", got, t0)
	}
	f.clk.Advance(cfg.Timeout - time.Nanosecond)
	if f.b.Allow() || f.b.State() != Open {
		t.Fatal("circuit left open before its timeout")
	}
	f.clk.Advance(time.Nanosecond)
	if !f.b.Allow() || f.b.State() != HalfOpen {
		t.Fatal("circuit not half-open at its timeout")
	}
	// Half-open is not throttled.
	for i := range 100 {
		if !f.b.Allow() {
			t.Fatalf("half-open refused request %d", i)
		}
	}
	// A failure reopens for a full timeout, counted from the reopening.
	f.clk.Advance(5 * time.Second)
	t1 := f.clk.Now()
	f.record(1, Failure)
	f.wantSnap(t, Open, 1, 0)
	if got := f.b.Snapshot().OpenedAt; !got.Equal(t1) {
		t.Fatalf("opened_at after reopening = %v, want %v", got, t1)
	}
	f.clk.Advance(cfg.Timeout - time.Nanosecond)
	if f.b.Allow() {
		t.Fatal("reopened circuit allowed before a full timeout")
	}
	f.clk.Advance(time.Nanosecond)
	if !f.b.Allow() {
		t.Fatal("reopened circuit refused after a full timeout")
	}
	f.record(2, Success)
	f.wantSnap(t, Closed, 0, 0)
}

// State and Snapshot observe the timeout too, so a reader never reports a stale open.
func TestTimeoutSeenByStateAndSnapshot(t *testing.T) {
	for name, check := range map[string]func(b *Breaker) State{
		"State":    (*Breaker).State,
		"Snapshot": func(b *Breaker) State { return b.Snapshot().State },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, testConfig())
			f.record(3, Failure)
			f.clk.Advance(testConfig().Timeout)
			f.rec.take()
			if got := check(f.b); got != HalfOpen {
				t.Fatalf("%s = %v after the timeout, want half_open", name, got)
			}
			if diff := cmp.Diff([]string{"transition open->half_open", "counts 0 0"}, f.rec.take()); diff != "" {
				t.Errorf("hooks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPromotion(t *testing.T) {
	t.Run("open goes half-open at once, counted once", func(t *testing.T) {
		f := newFixture(t, testConfig())
		f.record(3, Failure)
		f.rec.take()
		f.b.Promote() // no clock advance: the timeout is not waited for
		f.b.Promote() // already half-open: a second promotion starts no second trial
		want := []string{"transition open->half_open", "readmission", "counts 0 0"}
		if diff := cmp.Diff(want, f.rec.take()); diff != "" {
			t.Errorf("hooks (-want +got):\n%s", diff)
		}
		if !f.b.Allow() {
			t.Fatal("promoted circuit refused a request")
		}
		f.record(2, Success)
		f.wantSnap(t, Closed, 0, 0)
	})
	t.Run("closed count reset", func(t *testing.T) {
		f := newFixture(t, testConfig())
		f.record(2, Failure)
		f.b.Promote()
		f.wantSnap(t, Closed, 0, 0)
		f.record(2, Failure)
		f.wantSnap(t, Closed, 2, 0) // would have opened at 3 without the reset
		f.record(1, Failure)
		f.wantSnap(t, Open, 3, 0)
	})
	t.Run("closed with nothing to reset fires nothing", func(t *testing.T) {
		f := newFixture(t, testConfig())
		f.b.Promote()
		if got := f.rec.take(); got != nil {
			t.Fatalf("hooks = %v, want none", got)
		}
	})
}

// Each promotion starts at most one trial: a trial that fails reopens the circuit for a full
// timeout, and only a new promotion (a new flip to ready) or the timeout starts the next one.
func TestOneTrialPerPromotion(t *testing.T) {
	cfg := testConfig()
	f := newFixture(t, cfg)
	f.record(3, Failure)
	f.b.Promote()
	f.record(1, Failure) // the trial fails
	if f.b.Allow() {
		t.Fatal("failed trial left the circuit allowing")
	}
	f.clk.Advance(cfg.Timeout / 2)
	if f.b.Allow() {
		t.Fatal("circuit allowed before its timeout with no new promotion")
	}
	f.b.Promote() // a new flip to ready: a new trial
	if !f.b.Allow() {
		t.Fatal("second promotion did not start a trial")
	}
	if n := f.rec.count("readmission"); n != 2 {
		t.Fatalf("readmissions = %d, want 2", n)
	}
}

func TestDisabled(t *testing.T) {
	t.Run("never opens, still counts", func(t *testing.T) {
		cfg := testConfig()
		cfg.Disabled = true
		f := newFixture(t, cfg)
		f.record(1000, Failure)
		f.wantSnap(t, Closed, 1000, 0)
		if !f.b.Allow() {
			t.Fatal("disabled breaker refused a request")
		}
		if n := f.rec.count("outcome failure"); n != 1000 {
			t.Fatalf("outcomes counted = %d, want 1000", n)
		}
		if n := f.rec.count("transition"); n != 0 {
			t.Fatalf("disabled breaker made %d transitions", n)
		}
		f.record(1, Success)
		f.wantSnap(t, Closed, 0, 1)
	})
	t.Run("a worker's own threshold still applies", func(t *testing.T) {
		flags := DefaultConfig()
		flags.Disabled = true
		three := 3
		cfg, _ := Resolve(flags, &worker.Resilience{CBFailureThreshold: &three})
		f := newFixture(t, cfg)
		f.record(3, Failure)
		f.wantSnap(t, Open, 3, 0)
	})
}

func TestNewPanicsOnInvalidConfig(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted a zero failure threshold")
		}
	}()
	New(Config{SuccessThreshold: 1, Timeout: time.Second, Window: time.Second}, Options{})
}

func TestZeroOptionsUseRealClock(t *testing.T) {
	b := New(Config{FailureThreshold: 1, SuccessThreshold: 1, Timeout: time.Hour, Window: time.Hour}, Options{})
	before := time.Now()
	b.Record(Failure)
	s := b.Snapshot()
	if s.State != Open || s.OpenedAt.Before(before) || s.OpenedAt.After(time.Now()) {
		t.Fatalf("snapshot %+v: want open, opened between %v and now", s, before)
	}
	if b.Allow() {
		t.Fatal("open circuit with an hour's timeout allowed")
	}
}

// Concurrent use: exactly one transition per real change, however many goroutines race.
func TestConcurrentTransitionsFireOnce(t *testing.T) {
	cfg := testConfig()
	cfg.FailureThreshold = 50
	f := newFixture(t, cfg)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				f.b.Allow()
				f.b.Record(Failure)
			}
		})
	}
	wg.Wait()
	f.clk.Advance(cfg.Timeout)
	for range 8 {
		wg.Go(func() {
			for range 100 {
				f.b.Allow()
			}
		})
	}
	wg.Wait()
	var transitions []string
	for _, e := range f.rec.take() {
		if strings.HasPrefix(e, "transition") {
			transitions = append(transitions, e)
		}
	}
	want := []string{"transition closed->open", "transition open->half_open"}
	if diff := cmp.Diff(want, transitions); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
	f.wantSnap(t, HalfOpen, 0, 0)
}

func TestStateAndOutcomeNames(t *testing.T) {
	tests := []struct {
		s    State
		name string
	}{{Closed, "closed"}, {Open, "open"}, {HalfOpen, "half_open"}}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if int(tt.s) != i {
				t.Errorf("%v has metric value %d, want %d", tt.s, int(tt.s), i)
			}
			if tt.s.String() != tt.name {
				t.Errorf("String() = %q, want %q", tt.s.String(), tt.name)
			}
			b, err := tt.s.MarshalText()
			if err != nil || string(b) != tt.name {
				t.Errorf("MarshalText() = %q, %v", b, err)
			}
			var back State
			if err := back.UnmarshalText(b); err != nil || back != tt.s {
				t.Errorf("UnmarshalText(%q) = %v, %v", b, back, err)
			}
		})
	}
	if s := State(7).String(); s != "State(7)" {
		t.Errorf("State(7).String() = %q", s)
	}
	if _, err := State(7).MarshalText(); err == nil {
		t.Error("MarshalText accepted an unknown state")
	}
	var s State
	if err := s.UnmarshalText([]byte("ajar")); err == nil {
		t.Error("UnmarshalText accepted an unknown name")
	}
	for o, name := range map[Outcome]string{Ignored: "ignored", Success: "success", Failure: "failure", 9: "Outcome(9)"} {
		if o.String() != name {
			t.Errorf("Outcome %d String() = %q, want %q", o, o.String(), name)
		}
	}
}

// A PATCH of the worker's overrides changes the thresholds in place: the counts survive, the
// new failure threshold is judged at the next failure, and the new timeout at the next opening.
func TestReconfigureKeepsState(t *testing.T) {
	f := newFixture(t, testConfig())
	f.record(2, Failure)
	cfg := testConfig()
	cfg.FailureThreshold, cfg.Timeout = 5, 30*time.Second
	f.b.Reconfigure(cfg)
	f.wantSnap(t, Closed, 2, 0)
	f.record(2, Failure)
	f.wantSnap(t, Closed, 4, 0)
	f.record(1, Failure)
	f.wantSnap(t, Open, 5, 0)
	f.clk.Advance(testConfig().Timeout)
	if f.b.Allow() {
		t.Fatal("the old timeout still applied after Reconfigure")
	}
	f.clk.Advance(cfg.Timeout - testConfig().Timeout)
	if !f.b.Allow() {
		t.Fatal("the new timeout did not apply")
	}
	cfg.Disabled = true
	f.b.Reconfigure(cfg)
	f.record(1, Failure) // half-open: any failure reopens, whatever the threshold
	f.wantSnap(t, Open, 1, 0)
	defer func() {
		if recover() == nil {
			t.Error("Reconfigure accepted an invalid config")
		}
	}()
	f.b.Reconfigure(Config{})
}

// A new owner seeds the breaker from the previous owner's last bulletin: an open circuit keeps
// the time that was left of its timeout, and the hooks report the change.
func TestSeed(t *testing.T) {
	tests := []struct {
		name                string
		state               State
		failures, successes int
		reopenIn            time.Duration
		wantHooks           []string
	}{
		{"open with 4 s left", Open, 3, 0, 4 * time.Second, []string{"transition closed->open", "counts 3 0"}},
		{"half-open with a success", HalfOpen, 0, 1, 0, []string{"transition closed->half_open", "counts 0 1"}},
		{"closed with failures", Closed, 2, 0, 0, []string{"counts 2 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig())
			f.b.Seed(tt.state, tt.failures, tt.successes, tt.reopenIn)
			if diff := cmp.Diff(tt.wantHooks, f.rec.take()); diff != "" {
				t.Errorf("hooks (-want +got):\n%s", diff)
			}
			f.wantSnap(t, tt.state, tt.failures, tt.successes)
			if tt.state != Open {
				return
			}
			if got, want := f.b.Snapshot().ReopensAt, f.clk.Now().Add(tt.reopenIn); !got.Equal(want) {
				t.Fatalf("reopens_at = %v, want %v", got, want)
			}
			f.clk.Advance(tt.reopenIn - time.Nanosecond)
			if f.b.Allow() {
				t.Fatal("a seeded open circuit allowed before the time left")
			}
			f.clk.Advance(time.Nanosecond)
			if !f.b.Allow() || f.b.State() != HalfOpen {
				t.Fatal("a seeded open circuit is not half-open when the time left has passed")
			}
		})
	}
}
