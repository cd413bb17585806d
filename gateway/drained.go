package gateway

import "github.com/valyala/fasthttp"

// codeDraining is the error code of the 503 a gateway that left the mesh answers.
const codeDraining = "draining"

// bodyLeft answers a data-plane request on a gateway that left the mesh, in SMG's envelope.
var bodyLeft = envelopeCode(typeUnavailable, codeDraining,
	"this gateway was drained and has left the mesh; send the request to another gateway")

// LeaveMesh closes the data plane to new requests, for good: the gateway leaves the mesh after
// its drain (DESIGN.md section 5, Handoff), so its pool stops following the fleet (no bulletins,
// no raft entries) and would route from a frozen view. From then on the model routes and
// /v1/models answer 503 draining with Retry-After: 1 and Connection: close, before their body
// is read; the requests and streams already in flight finish. Probes (liveness 200, readiness
// 503 draining), /status, the admin routes and metrics answer as before. The check on the
// request path is one atomic load. Calling it again does nothing.
func (g *Gateway) LeaveMesh() {
	if g.left.Swap(true) {
		return
	}
	g.refreshReadiness()
	g.log.Info("left the mesh after the drain: new model requests answer 503 draining; requests in flight finish")
}

// writeLeft answers a request of route (a metric route) on a gateway that left the mesh, counts
// it, and logs its route_rejected record. The caller closes the connection, lingering when the
// body is unread.
func (g *Gateway) writeLeft(ctx *fasthttp.RequestCtx, route int) {
	writeError(ctx, fasthttp.StatusServiceUnavailable, bodyLeft)
	ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, "1")
	ctx.SetConnectionClose()
	g.refusedLeft.Add(1)
	g.metrics.observe(route, fasthttp.StatusServiceUnavailable, 0)
	var buf [64]byte
	id := g.stampID(ctx, buf[:0])
	if g.cfg.RequestLog {
		g.logShed(routeLabel(route), id, fasthttp.StatusServiceUnavailable, ctx.Time(), outcomeDraining)
	}
}
