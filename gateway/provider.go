package gateway

import (
	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/pool"
)

// candidates reads the workers an attempt may pick into c.cands: the routable ones, else, when
// the request's route has external providers, those an operator did not close, whatever their
// health and breaker (Rolter's fail-open, DESIGN.md section 2). It returns the gates that make
// a picked worker be selected again: every gate for a routable pick, only the operator's for a
// fail-open one (its health gate is closed by definition).
func (c *call) candidates(snap *pool.Snapshot, last *pool.Worker) pool.Gate {
	c.cands = snap.Candidates(c.cands, c.meta.Caps, c.meta.Model, last)
	if len(c.cands) > 0 || len(snap.External) == 0 {
		return ^pool.Gate(0)
	}
	c.cands = snap.FailOpen(c.cands, c.meta.Caps, c.meta.Model, last)
	return pool.OperatorGates
}

// noWorkers answers 503 for a request with no worker to try, as SMG does: "code":
// "no_available_workers" for an engine pool, "code": "service_unavailable" for a route of
// external providers (all of them disabled, quarantined or draining, since it fails open
// otherwise).
func (c *call) noWorkers(snap *pool.Snapshot) {
	code := codeNoWorkers
	if snap.ExternalRoute(c.meta.Caps, c.meta.Model) {
		code = codeUnavailable
	}
	c.fail(fasthttp.StatusServiceUnavailable, envelopeCode(typeUnavailable, code,
		"no available workers: "+snap.Why(c.meta.Caps, c.meta.Model)))
}
