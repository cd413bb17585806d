//go:build unix

package health

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

const fleet = 10_000

func fleetSpec(i int) worker.Spec {
	return worker.Spec{URL: fmt.Sprintf("http://127.0.0.1:%d", 10000+i), Health: &worker.Health{CheckIntervalSecs: ptr(1)}}
}

// TestFleetEverySweep: 10,000 workers at a 1 s interval are each probed once per sweep.
func TestFleetEverySweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		p := ProberFunc(func(context.Context, Target) error { n.Add(1); return nil })
		c := newChecker(t, DefaultConfig(), p, nil)
		for i := range fleet {
			if err := c.Add(fleetSpec(i), Ready); err != nil {
				t.Fatal(err)
			}
		}
		testkit.Advance(3500 * time.Millisecond)
		synctest.Wait()
		if got := n.Load(); got != 4*fleet {
			t.Errorf("%d probes in 4 sweeps, want %d", got, 4*fleet)
		}
	})
}

// BenchmarkSchedulerFleet measures the Checker's own cost per sweep of 10,000 workers with a
// no-op prober, on a manual clock: cpu-ms/sweep at a 1 s interval is the share of a core the
// scheduler takes (budget: 500). heap-B/worker is the memory each checked worker holds.
func BenchmarkSchedulerFleet(b *testing.B) {
	clk := newManualClock()
	var done, want atomic.Int64
	swept := make(chan struct{}, 1)
	p := ProberFunc(func(context.Context, Target) error {
		if done.Add(1) == want.Load() {
			swept <- struct{}{}
		}
		return nil
	})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c, err := New(Options{Config: DefaultConfig(), Clock: clk, Logger: slog.New(slog.DiscardHandler),
		Modes: map[string]Mode{worker.ModeHTTP: {Prober: p}}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	want.Store(fleet)
	for i := range fleet {
		c.Add(fleetSpec(i), Ready)
	}
	<-swept // the first probes run at once
	waitIdle(b, c)
	runtime.GC()
	runtime.ReadMemStats(&after)
	heapPerWorker := float64(after.HeapAlloc-before.HeapAlloc) / fleet

	cpu0 := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		want.Add(fleet)
		clk.Advance(time.Second)
		<-swept
		waitIdle(b, c)
	}
	b.StopTimer()
	b.ReportMetric(heapPerWorker, "heap-B/worker")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/sweep")
}

// waitIdle waits until no probe is in flight: the last probe of a sweep has counted itself but
// its result may not be recorded yet, and a worker still in flight would skip its next turn.
func waitIdle(b *testing.B, c *Checker) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		idle := c.running == 0
		c.mu.Unlock()
		if idle {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("probes still in flight after 10 s")
		}
		runtime.Gosched()
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
