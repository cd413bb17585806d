package logbatch

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// sink records what reaches the output, one entry per Write; with gate set, each Write waits
// until the test sends on gate.
type sink struct {
	mu     sync.Mutex
	writes []string
	gate   chan struct{}
}

func (s *sink) Write(p []byte) (int, error) {
	if s.gate != nil {
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, string(p))
	return len(p), nil
}

func (s *sink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.writes...)
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != len(want) {
		t.Errorf("%s: %q, want %q", what, got, want)
	}
}

// TestBatchedFlushesAfterTheInterval: batched records stay in memory until the interval has
// passed since the first of them, then go out in one write.
func TestBatchedFlushesAfterTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out sink
		w := New(&out, Options{Interval: 5 * time.Millisecond})
		defer w.Close()
		start := time.Now()
		b := w.Batched()
		b.Write([]byte("a\n"))
		time.Sleep(time.Millisecond)
		b.Write([]byte("b\n"))
		synctest.Wait()
		equal(t, "before the interval", out.got(), nil)
		time.Sleep(4*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		equal(t, "just before the interval", out.got(), nil)
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		equal(t, "at the interval", out.got(), []string{"a\nb\n"})
		if d := time.Since(start); d != 5*time.Millisecond {
			t.Errorf("flushed after %v", d)
		}
		b.Write([]byte("c\n"))
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		equal(t, "the next batch", out.got(), []string{"a\nb\n", "c\n"})
	})
}

// TestHalfFullFlushesAtOnce: a batch that passes half its limit is written without waiting
// for the interval, so that a burst finds room.
func TestHalfFullFlushesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out sink
		w := New(&out, Options{Interval: time.Hour, Limit: 10})
		defer w.Close()
		b := w.Batched()
		b.Write([]byte("ab\n"))
		synctest.Wait()
		equal(t, "below half", out.got(), nil)
		b.Write([]byte("cd\n"))
		synctest.Wait()
		equal(t, "past half", out.got(), []string{"ab\ncd\n"})
		b.Write([]byte("ef\n"))
		synctest.Wait()
		equal(t, "the next, below half", out.got(), []string{"ab\ncd\n"})
	})
}

// TestIdleWriterDoesNotWake: with nothing batched, no write is made however long it waits.
func TestIdleWriterDoesNotWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out sink
		w := New(&out, Options{Interval: 5 * time.Millisecond})
		defer w.Close()
		time.Sleep(time.Second)
		synctest.Wait()
		equal(t, "idle", out.got(), nil)
	})
}

// TestCloseFlushes: Close writes what is batched at once, and a record batched after Close
// goes out at once too, so a line logged during the exit is not lost.
func TestCloseFlushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out sink
		w := New(&out, Options{Interval: time.Hour})
		w.Batched().Write([]byte("a\n"))
		start := time.Now()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		equal(t, "after Close", out.got(), []string{"a\n"})
		w.Batched().Write([]byte("late\n"))
		equal(t, "batched after Close", out.got(), []string{"a\n", "late\n"})
		if time.Since(start) != 0 {
			t.Errorf("Close waited %v", time.Since(start))
		}
		if err := w.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}

// TestWriteKeepsOrder: a direct Write (a WARN line, say) goes out at once, after the records
// batched before it and in the same write, never ahead of them.
func TestWriteKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out sink
		w := New(&out, Options{Interval: time.Hour})
		defer w.Close()
		w.Batched().Write([]byte("r1\n"))
		w.Batched().Write([]byte("r2\n"))
		w.Write([]byte("warn\n"))
		equal(t, "after the direct write", out.got(), []string{"r1\nr2\nwarn\n"})
		w.Batched().Write([]byte("r3\n"))
		w.Close()
		equal(t, "after Close", out.got(), []string{"r1\nr2\nwarn\n", "r3\n"})
	})
}

// TestDropsWhenFullWithoutBlocking: while the output is stuck, batched records fill the
// limit, and then each further one is dropped and counted; the caller never waits.
func TestDropsWhenFullWithoutBlocking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := sink{gate: make(chan struct{})}
		w := New(&out, Options{Interval: time.Millisecond, Limit: 10})
		b := w.Batched()
		b.Write([]byte("0123\n")) // the flusher takes this one and blocks writing it
		time.Sleep(time.Millisecond)
		synctest.Wait()
		start := time.Now()
		for i := range 4 {
			if n, err := b.Write([]byte(fmt.Sprintf("r%d..\n", i))); n != 5 || err != nil {
				t.Fatalf("write %d: %d, %v", i, n, err)
			}
		}
		if time.Since(start) != 0 {
			t.Errorf("the caller waited %v", time.Since(start))
		}
		if got := w.Dropped(); got != 2 {
			t.Errorf("dropped %d, want 2", got)
		}
		out.gate <- struct{}{} // "0123\n" is written
		time.Sleep(time.Millisecond)
		synctest.Wait()
		out.gate <- struct{}{} // the two records kept
		synctest.Wait()
		equal(t, "written", out.got(), []string{"0123\n", "r0..\nr1..\n"})
		close(out.gate)
		w.Close()
	})
}

// TestDirectWriteLargerThanLimit: a direct Write is never dropped, whatever its size.
func TestDirectWriteLargerThanLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out sink
		w := New(&out, Options{Interval: time.Millisecond, Limit: 4})
		defer w.Close()
		line := bytes.Repeat([]byte("x"), 100)
		if n, err := w.Write(line); n != 100 || err != nil {
			t.Fatalf("%d, %v", n, err)
		}
		equal(t, "written", out.got(), []string{string(line)})
		if w.Dropped() != 0 {
			t.Errorf("dropped %d", w.Dropped())
		}
	})
}
