package leader

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/test/testkit"
)

// TestMain fails the package's tests when a duty's goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a duty that records its wakes and asks for the timer its test sets.
type recorder struct {
	mu      sync.Mutex
	wakes   []Wake
	next    time.Duration // 0: no timer
	signals chan struct{}
	also    chan struct{}
	terms   int
}

func newRecorder() *recorder {
	return &recorder{signals: make(chan struct{}, 1), also: make(chan struct{}, 1)}
}

func (r *recorder) Term() Term {
	r.mu.Lock()
	r.terms++
	r.mu.Unlock()
	return Term{
		Watch:    func() (<-chan struct{}, func()) { return r.signals, func() {} },
		Also:     r.also,
		Interval: time.Minute,
		Pass: func(_ context.Context, w Wake) time.Time {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.wakes = append(r.wakes, w)
			if r.next == 0 {
				return time.Time{}
			}
			return time.Now().Add(r.next)
		},
	}
}

func (r *recorder) seen() []Wake {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.wakes)
}

func (r *recorder) setNext(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next = d
}

// runInBubble runs Run(ctx, duties...) until the returned stop is called, which waits for it.
func runInBubble(run func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	return func() { cancel(); <-done }
}

// A duty passes at the start, on each signal of either source, every interval, and at the time
// its last pass asked for; a later pass that asks for nothing cancels that time.
func TestRunWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		stop := runInBubble(func(ctx context.Context) { Run(ctx, r) })
		defer stop()
		synctest.Wait()
		want := []Wake{Start}
		check := func(when string) {
			t.Helper()
			if got := r.seen(); !slices.Equal(got, want) {
				t.Fatalf("%s: wakes %v, want %v", when, got, want)
			}
		}
		check("at the start")

		r.signals <- struct{}{}
		synctest.Wait()
		want = append(want, Signal)
		check("after a membership signal")
		r.also <- struct{}{}
		synctest.Wait()
		want = append(want, Signal)
		check("after the other signal")

		testkit.Advance(time.Minute - time.Nanosecond)
		check("before the interval")
		testkit.Advance(time.Nanosecond)
		want = append(want, Tick)
		check("at the interval")

		// A pass asks for a timer 10 s on; the timer fires once.
		r.setNext(10 * time.Second)
		r.signals <- struct{}{}
		synctest.Wait()
		want = append(want, Signal)
		r.setNext(0)
		testkit.Advance(10 * time.Second)
		want = append(want, Timer)
		check("at the timer")
		testkit.Advance(20 * time.Second)
		check("after the timer (it fires once)")

		// A timer that a later pass does not ask for again does not fire.
		r.setNext(10 * time.Second)
		r.signals <- struct{}{}
		synctest.Wait()
		r.setNext(0)
		r.signals <- struct{}{}
		synctest.Wait()
		want = append(want, Signal, Signal)
		testkit.Advance(15 * time.Second)
		check("a cancelled timer")
	})
}

// A loop's term waits until its duties are set, gives each a term of its own, and ends when
// its context ends, before or after they are set.
func TestLoopWaitsForItsDuties(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var never Loop
		runInBubble(never.Run)() // returns: a term that ends before the duties are set

		var l Loop
		a, b := newRecorder(), newRecorder()
		stop := runInBubble(l.Run)
		synctest.Wait()
		if len(a.seen()) != 0 {
			t.Fatal("a duty ran before the loop's duties were set")
		}
		l.Set(a, b)
		l.Set(newRecorder()) // only the first call counts
		synctest.Wait()
		if !slices.Equal(a.seen(), []Wake{Start}) || !slices.Equal(b.seen(), []Wake{Start}) {
			t.Fatalf("wakes after Set: %v and %v, want one start each", a.seen(), b.seen())
		}
		stop()

		// The next term starts each duty anew.
		stop = runInBubble(l.Run)
		synctest.Wait()
		stop()
		if a.terms != 2 || !slices.Equal(a.seen(), []Wake{Start, Start}) {
			t.Fatalf("after two terms: %d terms, wakes %v", a.terms, a.seen())
		}
	})
}
