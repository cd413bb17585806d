package gateway

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestBodyBudgetTakesWhatFits(t *testing.T) {
	b := newBodyBudget(100)
	for _, step := range []struct {
		n    int64
		want bool
	}{{60, true}, {40, true}, {1, false}} {
		if got := b.tryTake(step.n); got != step.want {
			t.Fatalf("tryTake(%d) = %v with %d used", step.n, got, b.used.Load())
		}
	}
	b.give(60)
	if !b.tryTake(50) || b.used.Load() != 90 || b.peak.Load() != 100 {
		t.Fatalf("after giving 60 back: used %d, peak %d", b.used.Load(), b.peak.Load())
	}
}

// A request that finds the budget full waits exactly the bound, then is refused and counted.
func TestBodyBudgetWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBodyBudget(100)
		b.tryTake(80)
		start := time.Now()
		if b.take(30, 2*time.Second) {
			t.Fatal("took 30 bytes of a budget with 20 free")
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Errorf("waited %v, want the 2s bound", waited)
		}
		if st := b.status(); st.RefusedTotal != 1 || st.Waiting != 0 || st.BufferedBytes != 80 {
			t.Errorf("status %+v", st)
		}
	})
}

// A waiting request takes its bytes as soon as enough come back, however many gives that takes.
func TestBodyBudgetWaiterWakesWhenBytesComeBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBodyBudget(100)
		b.tryTake(90)
		got := make(chan time.Duration, 1)
		start := time.Now()
		go func() {
			if !b.take(50, time.Minute) {
				t.Error("refused although bytes came back within the bound")
			}
			got <- time.Since(start)
		}()
		synctest.Wait()
		if b.waiting.Load() != 1 {
			t.Fatalf("waiting %d, want 1", b.waiting.Load())
		}
		time.Sleep(time.Second)
		b.give(30) // 40 free: not yet
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("took 50 bytes with 40 free")
		default:
		}
		time.Sleep(time.Second)
		b.give(10)
		if waited := <-got; waited != 2*time.Second {
			t.Errorf("took the bytes after %v, want 2s (when the second give came)", waited)
		}
		if st := b.status(); st.BufferedBytes != 100 || st.RefusedTotal != 0 || st.Waiting != 0 {
			t.Errorf("status %+v", st)
		}
	})
}

// BenchmarkBodyBudget is what every model request pays for the budget: one take and one give,
// from all cores at once.
func BenchmarkBodyBudget(b *testing.B) {
	budget := newBodyBudget(1 << 30)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			budget.take(125, time.Second)
			budget.give(125)
		}
	})
}
