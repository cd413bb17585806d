package fakeengine

import (
	"sync"
	"sync/atomic"
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
}

// GatewayStats are the counts of one gateway.
type GatewayStats struct {
	Requests int64 `json:"requests"`
	Probes   int64 `json:"probes"`
}

// counters keeps the totals in atomics, so that the hot path takes the lock only to count by
// gateway.
type counters struct {
	requests atomic.Int64
	probes   atomic.Int64

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
	}
	for k, v := range c.byGateway {
		s.ByGateway[k] = *v
	}
	return s
}
