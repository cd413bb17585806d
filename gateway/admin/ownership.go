package admin

import (
	"context"
	"errors"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/ownership"
	"github.com/meshgw/meshgw/worker"
)

// Error codes of the ownership routes (docs/admin-api.md).
const (
	codePeerNotFound    = "peer_not_found"   // 404: the target is not a peer of the mesh
	codePeerUnavailable = "peer_unavailable" // 409: the target is not alive, or is draining
	codeHostLocal       = "host_local"       // 409: an ipc:// worker never changes owner
)

// Ownership makes an operator's ownership changes (DESIGN.md section 5); *ownership.Operator
// implements it. The handler runs a read barrier before and waits for the fleet after.
type Ownership interface {
	Transfer(ctx context.Context, rec fsm.Record, to string) (ownership.Outcome, error)
	Rebalance(ctx context.Context, dryRun bool) (ownership.Outcome, error)
}

// transferSuffix ends the path of POST /workers/{id}/transfer.
const transferSuffix = "/transfer"

// isTransfer reports whether path is POST /workers/{id}/transfer's.
func isTransfer(path string) bool {
	return strings.HasPrefix(path, "/workers/") && strings.HasSuffix(path, transferSuffix) && len(path) > len("/workers/")+len(transferSuffix)
}

// transferWorker is POST /workers/{id}/transfer {"to": NODE}: the worker's ownership moves to
// NODE, fenced on the (owner, epoch) the leader has, in one raft entry that makes the entry's
// index the new epoch. It answers the record once every live gateway applied it: from then on
// only NODE probes the worker. To the current owner: 200 with the record, nothing written.
func (h *Handler) transferWorker(ctx *fasthttp.RequestCtx) {
	if !h.owning(ctx) {
		return
	}
	raw, e := readBody(ctx)
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	var body struct {
		To string `json:"to"`
	}
	if e := strictDecode(raw, &body); e != nil {
		writeAPIErr(ctx, e)
		return
	}
	if body.To == "" {
		writeErr(ctx, fasthttp.StatusBadRequest, codeInvalidField, "to: required, the node id of the peer that takes the worker")
		return
	}
	ref, _, _ := strings.Cut(string(ctx.Request.URI().PathOriginal()), "?")
	ref = strings.TrimSuffix(strings.TrimPrefix(ref, "/workers/"), transferSuffix)
	// Judge the move against the leader's state: the fence is the owner and epoch it has.
	if !h.barrier(ctx) {
		return
	}
	rec, e := h.resolve(ref)
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	out, err := h.cfg.Ownership.Transfer(context.Background(), rec, body.To)
	h.logMove(ctx, "transfer", string(rec.ID)+" to "+body.To, out, err)
	if err != nil {
		writeAPIErr(ctx, moveError(err))
		return
	}
	ack := h.acknowledgeIndex(out.Index)
	cur, ok := h.cfg.Records.Worker(rec.ID)
	if !ok {
		writeErr(ctx, fasthttp.StatusNotFound, codeWorkerNotFound, "worker "+string(rec.ID)+" was removed meanwhile")
		return
	}
	r := h.record(&cur, h.cfg.Pool.Get(cur.ID))
	r.FleetAck = ack
	writeJSON(ctx, fasthttp.StatusOK, r)
}

// rebalanceAnswer is the body of POST /mesh/rebalance.
type rebalanceAnswer struct {
	DryRun bool `json:"dry_run"`
	// Moves is the plan: every move, fenced on the owner and epoch it was planned on.
	Moves []moveAnswer `json:"moves"`
	// Moved counts the workers that changed owner; Skipped lists the moves the fence refused.
	Moved   int            `json:"moved"`
	Skipped []skipAnswer   `json:"skipped"`
	Owners  map[string]int `json:"owners"`
	// FleetAck is set once the moves are committed: see Record.FleetAck.
	FleetAck *fleetack.Report `json:"fleet_ack,omitempty"`
}

type moveAnswer struct {
	Worker string `json:"worker"`
	URL    string `json:"url"`
	From   string `json:"from"`
	Epoch  uint64 `json:"epoch"`
	To     string `json:"to"`
}

type skipAnswer struct {
	Worker string `json:"worker"`
	Reason string `json:"reason"`
}

// rebalance is POST /mesh/rebalance [{"dry_run": true}]: the fewest moves that even out
// ownership region by region (ownership.PlanRebalance), planned on the leader's state and
// written as fenced raft entries; a dry run only plans. It answers the plan, what moved, and the
// owners' counts once every live gateway applied the moves.
func (h *Handler) rebalance(ctx *fasthttp.RequestCtx) {
	if !h.owning(ctx) {
		return
	}
	raw, e := readBody(ctx)
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	var body struct {
		DryRun bool `json:"dry_run"`
	}
	if len(raw) > 0 {
		if e := strictDecode(raw, &body); e != nil {
			writeAPIErr(ctx, e)
			return
		}
	}
	if !h.barrier(ctx) {
		return
	}
	out, err := h.cfg.Ownership.Rebalance(context.Background(), body.DryRun)
	h.logMove(ctx, "rebalance", "", out, err)
	if err != nil {
		writeAPIErr(ctx, moveError(err))
		return
	}
	ans := rebalanceAnswer{DryRun: body.DryRun, Moves: h.moves(out.Moves), Moved: len(out.Moved), Skipped: skips(out.Skipped),
		FleetAck: h.acknowledgeIndex(out.Index)}
	ans.Owners = h.owners()
	writeJSON(ctx, fasthttp.StatusOK, ans)
}

// owning refuses an ownership route on a gateway that cannot move workers.
func (h *Handler) owning(ctx *fasthttp.RequestCtx) bool {
	if h.cfg.Ownership == nil || !h.writable() {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, codeUnavailable, "this gateway runs without a raft node or a mesh; ownership cannot change here")
		return false
	}
	return true
}

// acknowledgeIndex waits for the fleet to apply index; nil for 0 (nothing written).
func (h *Handler) acknowledgeIndex(index uint64) *fleetack.Report {
	return h.acknowledge(fsm.Result{Index: index})
}

func (h *Handler) moves(ms []ownership.Move) []moveAnswer {
	out := make([]moveAnswer, len(ms))
	urls := make(map[worker.ID]string)
	for _, r := range h.cfg.Records.Workers() {
		urls[r.ID] = worker.RedactURL(r.Spec.URL)
	}
	for i, m := range ms {
		out[i] = moveAnswer{Worker: string(m.ID), URL: urls[m.ID], From: m.From, Epoch: m.Epoch, To: m.To}
	}
	return out
}

func skips(ss []fsm.ReassignSkip) []skipAnswer {
	out := make([]skipAnswer, len(ss))
	for i, s := range ss {
		out[i] = skipAnswer{Worker: string(s.ID), Reason: s.Reason}
	}
	return out
}

// owners counts the workers of each owner in this gateway's applied state.
func (h *Handler) owners() map[string]int {
	out := make(map[string]int)
	for _, r := range h.cfg.Records.Workers() {
		out[r.Owner]++
	}
	return out
}

// moveError maps an error of an ownership change to its answer.
func moveError(err error) *apiError {
	var te *ownership.TransferError
	switch {
	case errors.As(err, &te) && errors.Is(err, ownership.ErrUnknownPeer):
		return errorf(fasthttp.StatusNotFound, codePeerNotFound, te.Detail)
	case errors.As(err, &te) && errors.Is(err, ownership.ErrPeerUnavailable):
		return errorf(fasthttp.StatusConflict, codePeerUnavailable, te.Detail)
	case errors.As(err, &te) && errors.Is(err, ownership.ErrHostLocal):
		return errorf(fasthttp.StatusConflict, codeHostLocal, te.Detail)
	case errors.Is(err, ownership.ErrFenced):
		return errorf(fasthttp.StatusConflict, codeFenced, "the worker's owner or epoch changed while it was being moved; nothing moved: "+err.Error())
	}
	return mapWriteError(err, codeFenced)
}

// logMove logs one ownership change: who asked, what, and what it came to.
func (h *Handler) logMove(ctx *fasthttp.RequestCtx, what, detail string, out ownership.Outcome, err error) {
	args := []any{"what", what, "by", caller(ctx)}
	if detail != "" {
		args = append(args, "detail", detail)
	}
	if err != nil {
		h.log.Info("admin ownership change refused", append(args, "err", err)...)
		return
	}
	h.log.Info("admin ownership change", append(args, "planned", len(out.Moves), "moved", len(out.Moved),
		"skipped", len(out.Skipped), "index", out.Index)...)
}
