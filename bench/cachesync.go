package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/meshgw/meshgw/gateway/cachesync/cachesyncbench"
	"github.com/meshgw/meshgw/gateway/prefixindex"
)

// CacheSyncOptions configure the cachesync section: the fleet-wide cache index's propagation
// at 5 gateways (cachesyncbench.Propagation, in the harness's process). Zero fields take the
// defaults in their comments.
type CacheSyncOptions struct {
	// Requests is how many turns are timed (400).
	Requests int
	// Timeout bounds the whole section (2 min).
	Timeout time.Duration
}

func (c *CacheSyncOptions) setDefaults() {
	c.Requests = cmp0(c.Requests, 400)
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Minute
	}
}

// rateRPS is the request rate the section states the bytes at.
const rateRPS = 1000

// CacheSyncResult is the cachesync section.
type CacheSyncResult struct {
	Status string `json:"status"` // "measured"
	// What describes the setup and the definitions of the figures.
	What string `json:"what"`
	cachesyncbench.Result
	// BytesPerReq is ReportBytesPerReq + PublishBytesPerReq, and BlocksPerReq the blocks they
	// carried per request.
	BytesPerReq  float64 `json:"bytes_per_request"`
	BlocksPerReq float64 `json:"blocks_per_request"`
	// BytesPerSAt1000 is BytesPerReq × 1,000: the fleet's bytes per second at 1,000 requests/s,
	// computed from the serial turns, not measured at that rate.
	BytesPerSAt1000 float64 `json:"bytes_per_s_at_1000_rps"`
	// BoundBlocksPerReq is the most blocks one request can send: every block of the longest
	// prompt (PromptMaxBytes / prefixindex.BlockSize, rounded up) once to its owner and once to
	// each of the Gateways − 1 subscribers. BoundBytesPerReq is that at the run's bytes per block
	// (BytesPerReq ÷ BlocksPerReq, the messages' overhead included), and BoundBytesPerSAt1000
	// that × 1,000.
	BoundBlocksPerReq    float64 `json:"bound_blocks_per_request"`
	BoundBytesPerReq     float64 `json:"bound_bytes_per_request"`
	BoundBytesPerSAt1000 float64 `json:"bound_bytes_per_s_at_1000_rps"`
	// OthersCores is the CPU other processes used meanwhile.
	OthersCores float64 `json:"others_cpu_cores"`
}

// runCacheSync runs the cachesync section.
func runCacheSync(ctx context.Context, ps *procs, o *Options, c *CacheSyncOptions) any {
	c.setDefaults()
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	o.Log.Info("cachesync: index propagation", "gateways", 5, "requests", c.Requests)
	others := ps.startOthers()
	res, err := cachesyncbench.Propagation(ctx, cachesyncbench.Options{Requests: c.Requests})
	oc := others.stop()
	if err != nil {
		return notMeasured("cache index propagation: " + err.Error())
	}
	r := cacheSyncResult(res)
	r.OthersCores = oc
	return r
}

// cacheSyncResult adds the derived figures to what Propagation measured.
func cacheSyncResult(res cachesyncbench.Result) CacheSyncResult {
	r := CacheSyncResult{Status: "measured", Result: res,
		What: fmt.Sprintf("%d gateways in the harness's process over gRPC on 127.0.0.1, %d workers owned by %d of them; "+
			"%d turns of %d multi-turn chats (prompts of %d to %d bytes, each its session's earlier turns and a new one) "+
			"routed one at a time through the gateways in turn; propagation is from routing a turn until every gateway's "+
			"index matches its whole prompt; bytes are the encoded reports (gateways to owners) and publications (owners to "+
			"subscribers) during the timed turns; bytes per second at %d requests/s are bytes per request × %d, computed, "+
			"not measured at that rate", res.Gateways, res.Workers, res.Owners, res.Requests, res.Sessions,
			res.PromptMinBytes, res.PromptMaxBytes, rateRPS, rateRPS)}
	if res.Requests <= 0 {
		return r
	}
	r.BytesPerReq = res.ReportBytesPerReq + res.PublishBytesPerReq
	r.BlocksPerReq = float64(res.ReportBlocks+res.PublishBlocks) / float64(res.Requests)
	r.BytesPerSAt1000 = r.BytesPerReq * rateRPS
	blocks := (res.PromptMaxBytes + prefixindex.BlockSize - 1) / prefixindex.BlockSize
	r.BoundBlocksPerReq = float64(blocks * res.Gateways)
	if r.BlocksPerReq > 0 {
		r.BoundBytesPerReq = r.BoundBlocksPerReq * r.BytesPerReq / r.BlocksPerReq
		r.BoundBytesPerSAt1000 = r.BoundBytesPerReq * rateRPS
	}
	return r
}

// The goal of the cachesync section: a prefix routed through any gateway is known to every
// gateway within goalCachePropP99Ms at p99, at goalCacheGateways gateways.
const (
	goalCachePropP99Ms = 200.0
	goalCacheGateways  = 5
)

// cacheSyncGoals are the goal rows of the cachesync section: the propagation p99 (a verdict only
// at goalCacheGateways gateways or more), and the bytes against their bound.
func cacheSyncGoals(v any) []Goal {
	r, ok := v.(CacheSyncResult)
	if !ok {
		return nil
	}
	g := Goal{fmt.Sprintf("cache index propagation p99, %d gateways", r.Gateways),
		fmt.Sprintf("%.1f ms (p50 %.1f ms, max %.1f ms, %d requests)", r.P99Ms, r.P50Ms, r.MaxMs, r.Requests),
		fmt.Sprintf("≤ %.0f ms with %d", goalCachePropP99Ms, goalCacheGateways), nil}
	if r.Gateways >= goalCacheGateways {
		g.Met = met(r.P99Ms <= goalCachePropP99Ms)
	}
	return []Goal{g, {fmt.Sprintf("cache index bytes per request, %d gateways, %.0f-byte prompts", r.Gateways, r.PromptMeanBytes),
		fmt.Sprintf("%.0f B (reports %.0f, publications %.0f); %.2f MB/s at %d requests/s (computed)",
			r.BytesPerReq, r.ReportBytesPerReq, r.PublishBytesPerReq, r.BytesPerSAt1000/1e6, rateRPS),
		fmt.Sprintf("≤ %.0f B (%.0f blocks × %.1f B); %.2f MB/s", r.BoundBytesPerReq, r.BoundBlocksPerReq,
			safeDiv(r.BytesPerReq, r.BlocksPerReq), r.BoundBytesPerSAt1000/1e6),
		met(r.BlocksPerReq <= r.BoundBlocksPerReq)}}
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// printCacheSync writes the cachesync section's line.
func printCacheSync(w io.Writer, name string, r CacheSyncResult) {
	fmt.Fprintf(w, "%s: index propagation, %d gateways, %d requests: p50 %.1f ms, p99 %.1f ms, max %.1f ms (warm-up %.0f ms); "+
		"per request %.0f B of reports + %.0f B of publications = %.0f B (%.1f blocks; bound %.0f blocks, %.0f B); "+
		"at %d requests/s %.2f MB/s (computed; bound %.2f MB/s); %d blocks dropped; others used %.2f cores (%s)\n",
		name, r.Gateways, r.Requests, r.P50Ms, r.P99Ms, r.MaxMs, r.WarmUpMs, r.ReportBytesPerReq, r.PublishBytesPerReq,
		r.BytesPerReq, r.BlocksPerReq, r.BoundBlocksPerReq, r.BoundBytesPerReq, rateRPS, r.BytesPerSAt1000/1e6,
		r.BoundBytesPerSAt1000/1e6, r.Dropped, r.OthersCores, r.What)
}
