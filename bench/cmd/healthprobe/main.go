// Command healthprobe runs meshgw's health.Checker alone against many fake workers, so that the
// benchmark harness can read its CPU time and memory at a given fleet size and probe interval.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/meshgw/meshgw/bench"
	"github.com/meshgw/meshgw/ctxtime"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthprobe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	urls := fs.String("urls", "", "comma-separated engine base URLs the workers are spread over (loopback)")
	workers := fs.Int("workers", 10_000, "workers to check; beyond the URLs, workers share a URL with distinct dp_rank")
	interval := fs.Int("interval-secs", 1, "probe interval of every worker, seconds")
	warmup := fs.Duration("warmup", 3*time.Second, "time for the first probes before measuring")
	duration := fs.Duration("duration", 10*time.Second, "measured window")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	list := strings.Split(*urls, ",")
	if *urls == "" || *workers < 1 || *interval < 1 || *duration <= 0 {
		fmt.Fprintln(stderr, "healthprobe: need --urls, --workers ≥ 1, --interval-secs ≥ 1, --duration > 0")
		return 2
	}
	res, err := measure(ctx, list, *workers, *interval, *warmup, *duration, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "healthprobe:", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

// countingProber counts probes and failures around the real HTTP prober.
type countingProber struct {
	inner          health.Prober
	probes, failed atomic.Int64
}

func (p *countingProber) Probe(ctx context.Context, t health.Target) error {
	err := p.inner.Probe(ctx, t)
	p.probes.Add(1)
	if err != nil {
		p.failed.Add(1)
	}
	return err
}

// measure adds the workers, lets the first probes run for warmup, then measures the process's
// CPU time and memory over duration.
func measure(ctx context.Context, urls []string, n, intervalSecs int, warmup, duration time.Duration, stderr io.Writer) (*bench.HealthResult, error) {
	cfg := health.DefaultConfig()
	cfg.CheckIntervalSecs = intervalSecs
	prober := &countingProber{inner: &health.HTTPProber{}}
	var ready atomic.Int64
	c, err := health.New(health.Options{
		Config: cfg, NodeID: "bench",
		Modes:  map[string]health.Mode{worker.ModeHTTP: {Prober: prober}},
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnTransition: func(_ worker.ID, from, to health.State, _ bool) {
			if to == health.Ready {
				ready.Add(1)
			} else if from == health.Ready {
				ready.Add(-1)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	for i := range n {
		spec := worker.Spec{URL: urls[i%len(urls)]}
		if n > len(urls) {
			rank := i / len(urls)
			spec.DPRank = &rank
		}
		if err := c.Add(spec, health.Pending); err != nil {
			return nil, fmt.Errorf("add worker %d: %w", i, err)
		}
	}
	if err := ctxtime.Sleep(ctx, warmup); err != nil {
		return nil, err
	}
	cpu0, _ := bench.SelfCPU()
	p0, f0 := prober.probes.Load(), prober.failed.Load()
	start := time.Now()
	if err := ctxtime.Sleep(ctx, duration); err != nil {
		return nil, err
	}
	cpu1, _ := bench.SelfCPU()
	elapsed := time.Since(start)
	probes, failed := prober.probes.Load()-p0, prober.failed.Load()-f0
	rss, peak, _ := bench.SelfRSS()
	cpu := cpu1 - cpu0
	r := &bench.HealthResult{Workers: n, Hosts: len(urls), IntervalS: float64(intervalSecs), DurationS: elapsed.Seconds(),
		Probes: probes, Failed: failed, ProbesPerSec: float64(probes) / elapsed.Seconds(),
		ExpectedPerSec: float64(n) / float64(intervalSecs), ReadyWorkers: ready.Load(),
		CPUPercent: 100 * cpu.Seconds() / elapsed.Seconds(), RSSMiB: float64(rss) / (1 << 20),
		PeakRSSMiB: float64(peak) / (1 << 20), Goroutines: runtime.NumGoroutine()}
	if probes > 0 {
		r.CPUUsPerProbe = float64(cpu.Microseconds()) / float64(probes)
	}
	return r, nil
}
