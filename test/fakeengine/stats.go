package fakeengine

import (
	"sync"
	"sync/atomic"
	"time"
)

// Stats is what GET /_stats answers (DESIGN.md section 15).
type Stats struct {
	// Requests counts model requests, whatever became of them.
	Requests int64 `json:"requests"`
	// Probes counts health probes: GET /health, gRPC health checks, and ZMQ handshakes (the
	// ZMQ health check is local to the gateway, so a HELLO is the only probe-like message).
	Probes int64 `json:"probes"`
	// ByGateway splits both counts by the X-Mesh-Gateway header (gRPC metadata x-mesh-gateway,
	// the gateway id of a ZMQ HELLO). Traffic without one counts only in the totals.
	ByGateway map[string]GatewayStats `json:"by_gateway"`
	// WeightVersion is the version the last successful weight update set ("default").
	WeightVersion string `json:"weight_version"`
	// ComputeStats are there when the engine models compute (a Config.Compute knob is set);
	// their fields sit beside the others in the JSON.
	*ComputeStats
}

// ComputeStats are the counters of the compute model (Config.Compute).
type ComputeStats struct {
	// PromptTokens and CachedTokens sum the usage of the requests admitted to a slot: their
	// prompt tokens, and those the prefix cache held.
	PromptTokens int64 `json:"prompt_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
	// Queued counts the requests that waited for a slot, and QueueWaitMS their waits summed.
	Queued      int64   `json:"queued"`
	QueueWaitMS float64 `json:"queue_wait_ms"`
	// PrefillQueued counts the admitted requests that waited for a prefill lane
	// (Compute.PrefillLanes), and PrefillWaitMS their waits summed (inside SlotMS).
	PrefillQueued int64   `json:"prefill_queued"`
	PrefillWaitMS float64 `json:"prefill_wait_ms"`
	// SlotMS sums the time the requests held a slot: prefill, decode and sending the answer.
	// Beside the time the model asks for, it shows how much longer the machine made them.
	SlotMS float64 `json:"slot_ms"`
	// Running is the requests admitted and not yet answered; Waiting those waiting for a slot.
	Running int64 `json:"running"`
	Waiting int   `json:"waiting"`
	// CacheBlocks is the blocks the prefix cache holds; CacheEvictions the blocks it evicted.
	CacheBlocks    int   `json:"cache_blocks"`
	CacheEvictions int64 `json:"cache_evictions"`
}

// GatewayStats are the counts of one gateway.
type GatewayStats struct {
	Requests int64 `json:"requests"`
	Probes   int64 `json:"probes"`
}

// counters keeps the totals in atomics, so that the hot path takes the lock only to count by
// gateway.
type counters struct {
	requests  atomic.Int64
	probes    atomic.Int64
	prompt    atomic.Int64
	cached    atomic.Int64
	slotWaits waitCount
	laneWaits waitCount
	slot      atomic.Int64 // nanoseconds

	mu        sync.Mutex
	byGateway map[string]*GatewayStats
}

func (c *counters) countRequest(gateway string) {
	c.requests.Add(1)
	if gateway != "" {
		c.mu.Lock()
		c.gatewayLocked(gateway).Requests++
		c.mu.Unlock()
	}
}

func (c *counters) countTokens(u tokenUsage) {
	c.prompt.Add(int64(u.prompt))
	c.cached.Add(int64(u.cached))
}

// waitCount counts the requests that waited in one queue (for a slot, or for a prefill lane)
// and sums their waits.
type waitCount struct {
	n     atomic.Int64
	total atomic.Int64 // nanoseconds
}

func (w *waitCount) add(d time.Duration) {
	w.n.Add(1)
	w.total.Add(int64(d))
}

// ms returns the waits summed, in milliseconds.
func (w *waitCount) ms() float64 { return float64(w.total.Load()) / float64(time.Millisecond) }

func (c *counters) countSlot(held time.Duration) { c.slot.Add(int64(held)) }

func (c *counters) countProbe(gateway string) {
	c.probes.Add(1)
	if gateway != "" {
		c.mu.Lock()
		c.gatewayLocked(gateway).Probes++
		c.mu.Unlock()
	}
}

func (c *counters) gatewayLocked(gateway string) *GatewayStats {
	g := c.byGateway[gateway]
	if g == nil {
		if c.byGateway == nil {
			c.byGateway = make(map[string]*GatewayStats)
		}
		g = new(GatewayStats)
		c.byGateway[gateway] = g
	}
	return g
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{
		Requests:  c.requests.Load(),
		Probes:    c.probes.Load(),
		ByGateway: make(map[string]GatewayStats, len(c.byGateway)),
		ComputeStats: &ComputeStats{
			PromptTokens:  c.prompt.Load(),
			CachedTokens:  c.cached.Load(),
			Queued:        c.slotWaits.n.Load(),
			QueueWaitMS:   c.slotWaits.ms(),
			PrefillQueued: c.laneWaits.n.Load(),
			PrefillWaitMS: c.laneWaits.ms(),
			SlotMS:        float64(c.slot.Load()) / float64(time.Millisecond),
		},
	}
	for k, v := range c.byGateway {
		s.ByGateway[k] = *v
	}
	return s
}
