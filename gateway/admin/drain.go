package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/ownership"
)

// codeNoPeerLeft: a drain would leave no alive gateway to take the workers.
const codeNoPeerLeft = "no_peer_left"

// drainPoll is how often a drain that waits reads its progress again.
const drainPoll = 200 * time.Millisecond

// Drains tells what is left of drains; package server implements it over the records, the mesh and
// the raft configuration.
type Drains interface {
	// DrainStates returns the state of the drain of each of peers; with none, of every peer the
	// applied state marks draining.
	DrainStates(peers []string) []ownership.DrainState
}

// Drainer marks peers draining and moves their workers; *ownership.Operator implements it.
type Drainer interface {
	Drain(ctx context.Context, peers []string) (ownership.Outcome, error)
}

// drainAnswer is the body of POST /mesh/drain.
type drainAnswer struct {
	// Peers are the gateways drained, sorted by id.
	Peers []string `json:"peers"`
	// Moved counts the workers moved off them by this request; Stuck lists those that cannot
	// move (host-local, or no gateway to take them).
	Moved int      `json:"moved"`
	Stuck []string `json:"stuck"`
	// Done: every drained gateway owns nothing, leads nothing, left the raft configuration and
	// the mesh. Otherwise States says what is left after --drain-timeout-secs (202).
	Done     bool                   `json:"done"`
	States   []ownership.DrainState `json:"states"`
	FleetAck *fleetack.Report       `json:"fleet_ack,omitempty"`
}

// drainPeers is POST /mesh/drain {"peer": ID} or {"color": C}: the gateways named are marked
// draining and their workers move to the gateways that are not, in one fenced raft entry (the
// same rule as failover: same region first). Their runtime state travels with them (the new
// owners start from the old owners' last bulletins). Then the raft leader hands over its
// leadership if it is drained, the drained voters give their seats to gateways that stay, and
// the drained gateways leave the configuration and the mesh. It answers 200 when all of that is
// done, or 202 with what is left after DrainTimeout: the drain goes on, since it is kept in raft.
func (h *Handler) drainPeers(ctx *fasthttp.RequestCtx) {
	if h.cfg.Drainer == nil || h.cfg.Drains == nil || h.cfg.Peers == nil || !h.writable() {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, codeUnavailable, "this gateway runs without a raft node or a mesh; nothing can be drained here")
		return
	}
	raw, e := readBody(ctx)
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	var body struct {
		Peer  string `json:"peer"`
		Color string `json:"color"`
	}
	if e := strictDecode(raw, &body); e != nil {
		writeAPIErr(ctx, e)
		return
	}
	if (body.Peer == "") == (body.Color == "") {
		writeErr(ctx, fasthttp.StatusBadRequest, codeInvalidRequest, `name the gateways to drain: {"peer": ID} or {"color": C}, one of them`)
		return
	}
	ids, e := h.drainTargets(body.Peer, body.Color)
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	if !h.barrier(ctx) {
		return
	}
	out, err := h.cfg.Drainer.Drain(context.Background(), ids)
	h.logMove(ctx, "drain", strings.Join(ids, ","), out, err)
	if err != nil {
		writeAPIErr(ctx, moveError(err))
		return
	}
	ans := drainAnswer{Peers: ids, Moved: len(out.Moved), Stuck: make([]string, len(out.Stuck)), FleetAck: h.acknowledgeIndex(out.Index)}
	for i, id := range out.Stuck {
		ans.Stuck[i] = string(id)
	}
	ans.States = h.waitDrained(ids)
	ans.Done = ownership.AllDone(ans.States)
	status := fasthttp.StatusOK
	if !ans.Done {
		status = fasthttp.StatusAccepted
	}
	writeJSON(ctx, status, ans)
}

// drainTargets resolves the gateways a drain names: one peer of the mesh, or every alive or
// suspect peer of a color. It refuses a drain that leaves no alive gateway to take the workers.
func (h *Handler) drainTargets(peer, color string) ([]string, *apiError) {
	var ids []string
	stays := 0
	for _, p := range h.cfg.Peers.Peers() {
		if p.Status == "foreign" {
			continue
		}
		match := p.ID == peer || (color != "" && p.Color == color && (p.Status == "alive" || p.Status == "suspect"))
		switch {
		case match:
			ids = append(ids, p.ID)
		case p.Status == "alive":
			stays++
		}
	}
	switch {
	case len(ids) == 0 && peer != "":
		return nil, errorf(fasthttp.StatusNotFound, codePeerNotFound, peer+" is not a peer of this mesh")
	case len(ids) == 0:
		return nil, errorf(fasthttp.StatusNotFound, codePeerNotFound, fmt.Sprintf("no alive gateway has the color %q", color))
	case stays == 0:
		return nil, errorf(fasthttp.StatusConflict, codeNoPeerLeft, "draining "+strings.Join(ids, ", ")+" would leave no alive gateway to take the workers")
	}
	slices.Sort(ids)
	return ids, nil
}

// waitDrained reads the drains' progress until every one is done or DrainTimeout passed.
func (h *Handler) waitDrained(ids []string) []ownership.DrainState {
	deadline := time.NewTimer(h.cfg.DrainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for {
		states := h.cfg.Drains.DrainStates(ids)
		if ownership.AllDone(states) {
			return states
		}
		select {
		case <-deadline.C:
			return h.cfg.Drains.DrainStates(ids)
		case <-tick.C:
		}
	}
}

// drainProgress is GET /mesh/drain: the state of the drain of every gateway marked draining.
func (h *Handler) drainProgress(ctx *fasthttp.RequestCtx) {
	if h.cfg.Drains == nil {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, codeUnavailable, "this gateway runs without a raft node or a mesh")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string][]ownership.DrainState{"draining": h.cfg.Drains.DrainStates(nil)})
}
