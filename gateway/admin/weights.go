package admin

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/weights"
	"github.com/meshgw/meshgw/worker"
)

// Codes of the weight update's answers.
const (
	codeJournalUnresolved = "journal_unresolved" // 409: a weight update's record is open; 503: this one's stays open
	codeJournalNotOpen    = "journal_not_open"   // 404: no open record (by that id)
	codeNoTargets         = "no_targets"         // 400: the update names no HTTP engine worker
	codeNotDurable        = "not_durable"        // 503: --ephemeral: no durable journal
	codeUpdateFailed      = "weight_update_failed"
)

// WeightUpdates runs POST /update_weights_from_disk; *gateway/weights.Coordinator implements it.
type WeightUpdates interface {
	Update(ctx context.Context, body []byte, t weights.Target) (weights.Report, error)
}

// Journal reads the open weight-update records; *consensus.Node implements it.
type Journal interface {
	Journal() []fsm.JournalRecord
}

// journalRecord is one open record as GET /weight_update_journal answers it.
type journalRecord struct {
	ID            string               `json:"id"`
	Targets       []worker.ID          `json:"targets"`
	Outcomes      map[worker.ID]string `json:"outcomes"`
	Coordinator   string               `json:"coordinator"`
	StartedAt     time.Time            `json:"started_at"`
	Status        string               `json:"status"`
	PriorDisabled []worker.ID          `json:"prior_disabled"`
}

func journalView(j fsm.JournalRecord) journalRecord {
	r := journalRecord{ID: j.ID, Targets: j.Targets, Outcomes: j.Outcomes, Coordinator: j.Coordinator,
		StartedAt: j.StartedAt, Status: j.State(), PriorDisabled: j.PriorDisabled}
	if r.Targets == nil {
		r.Targets = []worker.ID{}
	}
	if r.PriorDisabled == nil {
		r.PriorDisabled = []worker.ID{}
	}
	if r.Outcomes == nil {
		r.Outcomes = map[worker.ID]string{}
	}
	return r
}

// updateWeights is POST /update_weights_from_disk: SGLang's body, passed to each engine
// unchanged; the targets are picked by ?model=NAME or ?worker_id=ID (an id or a URL; repeated,
// or comma-separated), by default every enabled HTTP engine worker. 200 when every target was
// updated; 502 weight_update_failed listing each target's outcome when some were not (the
// journal record stays open); 503 when nothing was sent: fleet_ack_timeout when its record
// closed, journal_unresolved when it stays open, outcome_unknown when closing it may have applied.
func (h *Handler) updateWeights(ctx *fasthttp.RequestCtx) {
	if h.cfg.Weights == nil {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, codeNotDurable,
			"weight updates need the durable journal, and this gateway runs with --ephemeral: nothing durable could record them")
		return
	}
	raw, e := readBody(ctx)
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	if _, e := decodeObject(raw); e != nil {
		writeAPIErr(ctx, e)
		return
	}
	target, e := weightTarget(ctx.QueryArgs())
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	for i, ref := range target.IDs { // an id or a URL, as /workers/{id} takes
		rec, e := h.resolve(string(ref))
		if e != nil {
			writeErr(ctx, fasthttp.StatusBadRequest, codeNoTargets, "worker_id: "+e.msg)
			return
		}
		target.IDs[i] = rec.ID
	}
	rep, err := h.cfg.Weights.Update(context.Background(), raw, target)
	var ie *weights.InputError
	var ce *fsm.ConflictError
	switch {
	case errors.As(err, &ie):
		writeErr(ctx, fasthttp.StatusBadRequest, codeNoTargets, ie.Msg)
		return
	case errors.As(err, &ce):
		writeErr(ctx, fasthttp.StatusConflict, codeJournalUnresolved, ce.Reason+
			": enable its workers one by one once verified, or POST /weight_update_journal/resolve {\"acknowledge\": true}")
		return
	case err != nil:
		writeError(ctx, err, codeJournalUnresolved)
		return
	}
	h.log.Info("weight update", "id", rep.ID, "result", rep.Result, "targets", len(rep.Targets), "remote", ctx.RemoteIP().String())
	switch rep.Result {
	case "ok":
		writeJSON(ctx, fasthttp.StatusOK, rep)
	case "not_started":
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, withError(rep, "fleet_ack_timeout"))
	case weights.ResultUnresolved: // nothing was sent, but this update's own record stays open
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, withError(rep, codeJournalUnresolved))
	case weights.ResultOutcomeUnknown: // nothing was sent; closing the record may have applied
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, withError(rep, codeOutcomeUnknown))
	default:
		writeJSON(ctx, fasthttp.StatusBadGateway, withError(rep, codeUpdateFailed))
	}
}

// withError adds the admin API's error envelope to a report that is not a success.
func withError(rep weights.Report, code string) any {
	return struct {
		weights.Report
		Error map[string]string `json:"error"`
	}{rep, map[string]string{"message": rep.Message, "code": code}}
}

// weightTarget reads ?model= and ?worker_id= (not both).
func weightTarget(q *fasthttp.Args) (weights.Target, *apiError) {
	var t weights.Target
	t.Model = string(q.Peek("model"))
	for _, v := range q.PeekMulti("worker_id") {
		for id := range strings.SplitSeq(string(v), ",") {
			if id = strings.TrimSpace(id); id != "" {
				t.IDs = append(t.IDs, worker.ID(id))
			}
		}
	}
	if t.Model != "" && len(t.IDs) > 0 {
		return t, errorf(fasthttp.StatusBadRequest, codeInvalidField, "model and worker_id: give one of them, not both")
	}
	return t, nil
}

// getJournal is GET /weight_update_journal: the open records (an empty list when none).
func (h *Handler) getJournal(ctx *fasthttp.RequestCtx) {
	if h.cfg.Journal == nil {
		writeJSON(ctx, fasthttp.StatusOK, map[string]any{"records": []journalRecord{}})
		return
	}
	consistent, e := wantsConsistent(ctx)
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	if consistent && !h.barrier(ctx) {
		return
	}
	out := []journalRecord{}
	for _, j := range h.cfg.Journal.Journal() {
		out = append(out, journalView(j))
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"records": out})
}

// resolveJournal is POST /weight_update_journal/resolve {"acknowledge": true[, "id": ID]}: it
// drops the open record (the one named, or the only one) and answers the worker ids it held,
// which stay disabled until enabled one by one.
func (h *Handler) resolveJournal(ctx *fasthttp.RequestCtx) {
	if h.cfg.Journal == nil {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, codeNotDurable, "this gateway keeps no weight-update journal")
		return
	}
	raw, e := readBody(ctx)
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	obj, e := decodeObject(raw)
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	if e := obj.only([]string{"acknowledge", "id"}, ""); e != nil {
		writeAPIErr(ctx, e)
		return
	}
	var body struct {
		Acknowledge bool   `json:"acknowledge"`
		ID          string `json:"id"`
	}
	if e := strictDecode(raw, &body); e != nil {
		writeAPIErr(ctx, e)
		return
	}
	if !body.Acknowledge {
		writeErr(ctx, fasthttp.StatusBadRequest, codeInvalidField,
			`acknowledge: must be true: resolving drops the record, and its workers stay disabled until enabled one by one`)
		return
	}
	if !h.barrier(ctx) {
		return
	}
	var rec *fsm.JournalRecord
	for _, j := range h.cfg.Journal.Journal() {
		if body.ID == "" || j.ID == body.ID {
			rec = &j
			break
		}
	}
	if rec == nil {
		msg := "no weight update record is open"
		if body.ID != "" {
			msg = "weight update " + body.ID + " is not open"
		}
		writeErr(ctx, fasthttp.StatusNotFound, codeJournalNotOpen, msg)
		return
	}
	res, err := h.cfg.Writer.Apply(context.Background(), fsm.JournalResolve{ID: rec.ID, Action: fsm.ResolveAcknowledge,
		At: h.now(), By: "admin"})
	if err == nil && res.Err != nil {
		err = res.Err
	}
	var nf *fsm.NotFoundError
	switch {
	case errors.As(err, &nf):
		writeErr(ctx, fasthttp.StatusNotFound, codeJournalNotOpen, nf.Error())
		return
	case err != nil:
		writeError(ctx, err, codeJournalUnresolved)
		return
	}
	h.log.Info("weight update record resolved by acknowledgement", "id", rec.ID, "workers", len(rec.Targets), "remote", ctx.RemoteIP().String())
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"resolved": rec.ID, "dropped": journalView(*rec).Targets,
		"fleet_ack": h.acknowledge(res)})
}
