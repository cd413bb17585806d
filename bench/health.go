package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// HealthOptions configure the health-checker section: one process running health.Checker that
// probes Workers workers every Interval, spread over Listeners ports of one upstream process.
type HealthOptions struct {
	Bin       string        // the bench-healthprobe binary; default "bin/bench-healthprobe"
	Workers   int           // default 10,000
	Listeners int           // upstream ports the workers are spread over; default 1,000
	Interval  time.Duration // whole seconds; default 1 s
	Warmup    time.Duration // before measuring; default 3 s
	Duration  time.Duration // measured window; default 10 s
}

// HealthResult is what the health section measured, as bench-healthprobe prints it.
type HealthResult struct {
	Status         string  `json:"status"` // "measured"
	Workers        int     `json:"workers"`
	Hosts          int     `json:"hosts"` // distinct host:port among the workers
	IntervalS      float64 `json:"interval_s"`
	DurationS      float64 `json:"duration_s"`
	Probes         int64   `json:"probes"`
	Failed         int64   `json:"failed"`
	ProbesPerSec   float64 `json:"probes_per_s"`
	ExpectedPerSec float64 `json:"expected_probes_per_s"`
	ReadyWorkers   int64   `json:"ready_workers"`
	CPUPercent     float64 `json:"cpu_percent"` // of one core
	CPUUsPerProbe  float64 `json:"cpu_us_per_probe"`
	RSSMiB         float64 `json:"rss_mib"`
	PeakRSSMiB     float64 `json:"peak_rss_mib"`
	Goroutines     int     `json:"goroutines"`
	// UpstreamCPUPercent is what answering the probes cost the fake engines, for scale.
	UpstreamCPUPercent float64 `json:"upstream_cpu_percent"`
}

func (h *HealthOptions) setDefaults() {
	if h.Bin == "" {
		h.Bin = "bin/bench-healthprobe"
	}
	h.Workers = cmp0(h.Workers, 10_000)
	h.Listeners = cmp0(h.Listeners, 1_000)
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{&h.Interval, time.Second}, {&h.Warmup, 3 * time.Second}, {&h.Duration, 10 * time.Second}} {
		if *d.p <= 0 {
			*d.p = d.v
		}
	}
}

// SelfCPU returns the CPU time this process has used.
func SelfCPU() (time.Duration, error) { return cpuTime(os.Getpid()) }

// SelfRSS returns this process's resident set size and its peak, in bytes.
func SelfRSS() (rss, peak int64, err error) { return rssBytes(os.Getpid()) }

// runHealth starts an upstream with many listeners and bench-healthprobe against it, and
// returns its result, or NotMeasured with the reason it failed.
func runHealth(ctx context.Context, ps *procs, o *Options) any {
	h := *o.Health
	h.setDefaults()
	o.Log.Info("health checker", "workers", h.Workers, "hosts", h.Listeners, "interval", h.Interval, "seconds", h.Duration.Seconds())
	up, urls, err := ps.startURL(ctx, "health-upstream", h.Listeners, o.UpstreamBin, "--listeners", strconv.Itoa(h.Listeners))
	if err != nil {
		return notMeasured("health upstream: " + err.Error())
	}
	var out bytes.Buffer
	p, err := ps.start("healthprobe", &out, h.Bin, "--urls", strings.Join(urls, ","),
		"--workers", strconv.Itoa(h.Workers), "--interval-secs", strconv.Itoa(max(1, int(h.Interval/time.Second))),
		"--warmup", h.Warmup.String(), "--duration", h.Duration.String())
	if err != nil {
		return notMeasured(err.Error())
	}
	var upCPU *cpuMeter
	select {
	case <-time.After(h.Warmup):
		upCPU = startCPU(up.Pid())
	case <-p.Done():
	case <-ctx.Done():
		return notMeasured(ctx.Err().Error())
	}
	select {
	case <-p.Done():
	case <-time.After(h.Warmup + h.Duration + 30*time.Second):
		return notMeasured("bench-healthprobe did not finish in time")
	case <-ctx.Done():
		return notMeasured(ctx.Err().Error())
	}
	var r HealthResult
	if p.Err() != nil || json.Unmarshal(out.Bytes(), &r) != nil {
		return notMeasured(fmt.Sprintf("bench-healthprobe failed: %v (see %s/healthprobe.log)", p.Err(), o.WorkDir))
	}
	r.Status = "measured"
	if upCPU != nil && r.DurationS > 0 {
		r.UpstreamCPUPercent = 100 * upCPU.stop().Seconds() / r.DurationS
	}
	return r
}
