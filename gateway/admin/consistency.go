package admin

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/consensus/fsm"
)

// barrierBound bounds a read barrier: asking the leader its read index and applying up to it.
const barrierBound = 5 * time.Second

// Fleet makes the admin API's writes fleet-acknowledged and its reads linearizable on demand
// (DESIGN.md section 3); *fleetack.FleetAck implements it.
type Fleet interface {
	// Acknowledge waits until every live peer's data plane applied index, bounded by
	// --fleet-ack-timeout-secs, and names who did and who lagged.
	Acknowledge(ctx context.Context, index uint64) fleetack.Report
	// Barrier returns once this gateway applied every write acknowledged before the call (a
	// read index asked of the leader).
	Barrier(ctx context.Context) error
}

// cutOffer is a Writer that can tell when this gateway is cut off from the quorum
// (*gateway/fleet.Writer over the forwarder).
type cutOffer interface{ CutOff() error }

// barrier runs the read barrier when the gateway has a Fleet, and answers the error itself; it
// reports whether the handler may go on.
func (h *Handler) barrier(ctx *fasthttp.RequestCtx) bool {
	if h.left() {
		writeAPIErr(ctx, errLeft)
		return false
	}
	if h.cfg.Fleet == nil {
		return true
	}
	err := h.runBarrier()
	if err == nil {
		return true
	}
	h.log.Info("read barrier failed", "method", string(ctx.Method()), "path", string(ctx.Path()), "err", err)
	var nq *consensus.NoQuorumError
	switch {
	case errors.As(err, &nq):
		writeAPIErr(ctx, mapWriteError(err, codeRevisionConflict))
	case errors.Is(err, consensus.ErrNoLeader):
		writeErr(ctx, fasthttp.StatusServiceUnavailable, codeNoLeader, "the raft leader could not be asked for the current state; nothing was written")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, consensus.ErrTimeout):
		writeErr(ctx, fasthttp.StatusServiceUnavailable, codeWriteTimeout, "this gateway did not catch up with the raft leader in time; nothing was written")
	default:
		writeAPIErr(ctx, mapWriteError(err, codeRevisionConflict))
	}
	return false
}

// cutOffPoll is how often a read barrier in progress asks whether the gateway was cut off.
const cutOffPoll = 50 * time.Millisecond

// runBarrier runs the read barrier within barrierBound. A gateway cut off from the quorum (a
// region cut: the writer's probes find it within a second) cannot ask the leader, so the
// barrier is not begun then, and one in progress ends as soon as the cut is found; either
// returns the writer's *consensus.NoQuorumError.
func (h *Handler) runBarrier() error {
	bctx, cancel := context.WithTimeout(context.Background(), barrierBound)
	defer cancel()
	c, ok := h.cfg.Writer.(cutOffer)
	if !ok {
		return h.cfg.Fleet.Barrier(bctx)
	}
	wctx, stopWatch := consensus.UntilCutOff(bctx, cutOffPoll, c.CutOff)
	defer stopWatch()
	var nq *consensus.NoQuorumError
	if errors.As(context.Cause(wctx), &nq) {
		return nq // cut off already: the barrier is not begun
	}
	err := h.cfg.Fleet.Barrier(wctx)
	if err != nil && errors.As(context.Cause(wctx), &nq) {
		return nq
	}
	return err
}

// wantsConsistent reads ?consistent= of a GET: true adds a read barrier through the leader.
func wantsConsistent(ctx *fasthttp.RequestCtx) (bool, *apiError) {
	switch string(ctx.QueryArgs().Peek("consistent")) {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, errorf(fasthttp.StatusBadRequest, codeInvalidRequest, "consistent: takes true or false")
	}
}

// acknowledge waits for the fleet to apply a committed write; nil without a Fleet.
func (h *Handler) acknowledge(res fsm.Result) *fleetack.Report {
	if h.cfg.Fleet == nil || res.Index == 0 {
		return nil
	}
	rep := h.cfg.Fleet.Acknowledge(context.Background(), res.Index)
	return &rep
}

// writeWritten answers the record a committed write left, once the fleet acknowledged it.
func (h *Handler) writeWritten(ctx *fasthttp.RequestCtx, status int, res fsm.Result) {
	if res.Record == nil {
		writeErr(ctx, fasthttp.StatusInternalServerError, codeInternal, "the write returned no record")
		return
	}
	ack := h.acknowledge(res)
	r := h.record(res.Record, h.cfg.Pool.Get(res.Record.ID))
	r.FleetAck = ack
	writeJSON(ctx, status, r)
}
