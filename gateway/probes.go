package gateway

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Readiness reasons.
const (
	reasonNoWorkers = "insufficient healthy workers"
	reasonDraining  = "draining"
	reasonNoQuorum  = "no quorum"
)

// readiness is the answer of /readiness, rendered from events (pool changes, shutdown) and at
// least once a second, and served from memory. mu orders the renders, so that
// Config.OnReadiness learns the flips in the order they happened.
type readiness struct {
	cur atomic.Pointer[readyAnswer]
	mu  sync.Mutex
}

type readyAnswer struct {
	status int
	body   []byte
}

type readyBody struct {
	Status         string `json:"status"`
	Reason         string `json:"reason,omitempty"`
	HealthyWorkers int    `json:"healthy_workers"`
	TotalWorkers   int    `json:"total_workers"`
}

func (g *Gateway) refreshReadiness() {
	g.ready.mu.Lock()
	defer g.ready.mu.Unlock()
	snap := g.pool.Snapshot()
	b := readyBody{Status: "ready", HealthyWorkers: snap.RoutableCount(), TotalWorkers: len(snap.All)}
	status := fasthttp.StatusOK
	switch {
	case g.draining.Load() || g.readinessWithdrawn.Load() || g.left.Load():
		b.Status, b.Reason, status = "not_ready", reasonDraining, fasthttp.StatusServiceUnavailable
	case g.cfg.ReadinessRequiresQuorum && g.cfg.Quorum != nil && !g.cfg.Quorum():
		b.Status, b.Reason, status = "not_ready", reasonNoQuorum, fasthttp.StatusServiceUnavailable
	case b.HealthyWorkers == 0:
		b.Status, b.Reason, status = "not_ready", reasonNoWorkers, fasthttp.StatusServiceUnavailable
	}
	body, _ := json.Marshal(b)
	prev := g.ready.cur.Swap(&readyAnswer{status: status, body: body})
	if f := g.cfg.OnReadiness; f != nil && (prev == nil || prev.status != status) {
		f(status == fasthttp.StatusOK)
	}
}

// Ready reports whether /readiness answers 200.
func (g *Gateway) Ready() bool { return g.ready.cur.Load().status == fasthttp.StatusOK }

// readinessLoop re-renders readiness every second, backing up the event-driven refreshes.
func (g *Gateway) readinessLoop() {
	defer g.bg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			g.refreshReadiness()
		}
	}
}

var bodyAlive = []byte(`{"status":"alive"}`)

// serveProbe answers the liveness and readiness endpoints; they are never gated by admission.
func (g *Gateway) serveProbe(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		writeError(ctx, fasthttp.StatusMethodNotAllowed, bodyMethod)
		return
	}
	ctx.SetContentType("application/json")
	switch string(ctx.Path()) {
	case "/readiness", "/ready":
		a := g.ready.cur.Load()
		ctx.SetStatusCode(a.status)
		ctx.SetBody(a.body)
	default:
		ctx.SetBody(bodyAlive)
	}
}
