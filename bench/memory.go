package bench

import (
	"context"
	"fmt"
	"time"
)

// MemoryResult is the memory section: a gateway whose raft state holds many worker records,
// all owned by another gateway (imported: routed to, not probed), started on that state; and
// a gateway taking many large uploads at once.
type MemoryResult struct {
	Status  string `json:"status"`  // "measured"
	Workers int    `json:"workers"` // 0 when the records part was skipped
	// Uploads is []UploadRun, or NotMeasured.
	Uploads any `json:"uploads"`
	// FillS is how long `raftbench fill` took to write and snapshot the records (not a goal).
	FillS float64 `json:"fill_s"`
	// StartS is the median time from starting meshgw to its /status counting every worker: the
	// snapshot restored and the records in the data plane's pool. StartRunsS are the runs.
	StartS     float64   `json:"start_s"`
	StartRunsS []float64 `json:"start_runs_s"`
	// LeaderS is the median time to the node leading its mesh of one (raft's election timeout
	// after the restore), when the records are current rather than restored.
	LeaderS float64 `json:"leader_s"`
	// Heap is Go's HeapAlloc after a forced GC, with the records and without (the same
	// meshgw on a state directory with no workers); BytesPerWorker is their difference per
	// worker. RSS the same, for scale: it also holds memory the GC has freed but not returned.
	HeapMiB           float64 `json:"heap_alloc_mib"`
	BaselineHeapMiB   float64 `json:"baseline_heap_alloc_mib"`
	BytesPerWorker    float64 `json:"heap_bytes_per_worker"`
	RSSMiB            float64 `json:"rss_mib"`
	BaselineRSSMiB    float64 `json:"baseline_rss_mib"`
	RSSBytesPerWorker float64 `json:"rss_bytes_per_worker"`
	// Registration is sequential registrations with 1,000 records and with Workers records, and
	// the stop that followed each (registration.go).
	Registration []*RegistrationRate `json:"registration"`
}

// runMemory fills a state directory with Workers imported records and an empty one, starts
// meshgw on each, and returns the start time and memory, or NotMeasured with the reason.
func runMemory(ctx context.Context, ps *procs, o *Options) any {
	c := o.Control
	res := MemoryResult{Status: "measured", Uploads: notMeasured("skipped (-uploads 0)")}
	if !c.NoRecords {
		r := runRecords(ctx, ps, o)
		m, ok := r.(MemoryResult)
		if !ok {
			return r
		}
		res = m
	}
	if c.Uploads > 0 {
		res.Uploads = runUploads(ctx, ps, o)
	}
	return res
}

// runRecords is the part with many worker records.
func runRecords(ctx context.Context, ps *procs, o *Options) any {
	c := o.Control
	res := MemoryResult{Status: "measured", Workers: c.Workers}
	o.Log.Info("memory: writing worker records", "workers", c.Workers)
	full, err := fillState(ps, o, "state-full", c.Workers)
	if err != nil {
		return notMeasured(err.Error())
	}
	res.FillS = full
	if _, err := fillState(ps, o, "state-empty", 0); err != nil {
		return notMeasured(err.Error())
	}
	var leaders []float64
	for i := range c.Starts {
		o.Log.Info("memory: starting meshgw on the records", "run", i+1, "of", c.Starts)
		g, err := startControlGateway(ps, o, fmt.Sprintf("meshgw-mem-%d", i+1), o.WorkDir+"/state-full")
		if err != nil {
			return notMeasured(err.Error())
		}
		served, err := g.waitStatus(ctx, 60*time.Second, func(s gatewayStatus) bool { return s.Workers.Total == c.Workers })
		if err == nil {
			var lead time.Duration
			lead, err = g.waitStatus(ctx, 60*time.Second, func(s gatewayStatus) bool { return s.Raft != nil && s.Raft.Leader == "bench" })
			leaders = append(leaders, lead.Seconds())
		}
		if err == nil && i == c.Starts-1 {
			time.Sleep(time.Second) // let the pass after the election finish before weighing the heap
			var heap, rss int64
			heap, rss, err = g.heapAlloc(ctx)
			res.HeapMiB, res.RSSMiB = mib(heap), mib(rss)
			if err == nil {
				o.Log.Info("memory: registrations and a timed stop", "workers", c.Workers, "registrations", c.Registrations)
				var r *RegistrationRate
				if r, err = measureRegistrations(ctx, o, g, c.Workers); err == nil {
					res.Registration = append(res.Registration, r)
				}
			}
		}
		g.stop()
		if err != nil {
			return notMeasured("meshgw on the records: " + err.Error())
		}
		res.StartRunsS = append(res.StartRunsS, served.Seconds())
	}
	o.Log.Info("memory: registrations and a timed stop", "workers", registrationSmall, "registrations", c.Registrations)
	small, err := smallFleetRegistrations(ctx, ps, o)
	if err != nil {
		return notMeasured("registrations with " + fmt.Sprint(registrationSmall) + " records: " + err.Error())
	}
	res.Registration = append([]*RegistrationRate{small}, res.Registration...)
	g, err := startControlGateway(ps, o, "meshgw-mem-empty", o.WorkDir+"/state-empty")
	if err != nil {
		return notMeasured(err.Error())
	}
	_, err = g.waitStatus(ctx, 60*time.Second, func(s gatewayStatus) bool { return s.Raft != nil && s.Raft.Leader == "bench" })
	var heap, rss int64
	if err == nil {
		time.Sleep(time.Second) // as above, so that both are weighed alike
		heap, rss, err = g.heapAlloc(ctx)
	}
	g.stop()
	if err != nil {
		return notMeasured("meshgw with no records: " + err.Error())
	}
	res.BaselineHeapMiB, res.BaselineRSSMiB = mib(heap), mib(rss)
	res.StartS, res.LeaderS = median(res.StartRunsS), median(leaders)
	n := float64(c.Workers)
	res.BytesPerWorker = (res.HeapMiB - res.BaselineHeapMiB) * (1 << 20) / n
	res.RSSBytesPerWorker = (res.RSSMiB - res.BaselineRSSMiB) * (1 << 20) / n
	return res
}

// fillState writes a state directory WorkDir/name holding n records owned by another node,
// and returns how long that took.
func fillState(ps *procs, o *Options, name string, n int) (float64, error) {
	dir, err := tempStateDir(o, name)
	if err != nil {
		return 0, err
	}
	var fill struct {
		TookS float64 `json:"took_s"`
	}
	if err := runRaftbench(ps, o.Control, "raftbench-"+name, 5*time.Minute, &fill, "fill", "--state-dir", dir,
		"--node-id", "bench", "--owner", "elsewhere", "--workers", fmt.Sprint(n)); err != nil {
		return 0, err
	}
	return fill.TookS, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
