package admin

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// casAttempts bounds how often a PUT or PATCH re-reads and re-applies a record that changed
// between its read and its compare-and-set, before it answers 409 revision_conflict.
const casAttempts = 3

// registerWorker is POST /workers: 201 with the new record, 200 when the same spec is already
// registered, 409 when the id is registered with another spec.
func (h *Handler) registerWorker(ctx *fasthttp.RequestCtx) {
	spec, owner, e := h.decodeRegistration(ctx)
	if e == nil {
		e = h.checkOwner(owner)
	}
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	at := h.now()
	res, err := h.register(context.Background(), spec, owner, at)
	h.logWrite(ctx, spec.ID(), res, err)
	if err != nil {
		writeError(ctx, err, codeWorkerExists)
		return
	}
	status := fasthttp.StatusOK
	if res.Outcome == fsm.Created || createdByFirstCopy(res, at) {
		status = fasthttp.StatusCreated
	}
	h.writeWritten(ctx, status, res)
}

// register writes the registration of a normalized spec owned by owner ("": this gateway).
func (h *Handler) register(ctx context.Context, spec worker.Spec, owner string, at time.Time) (fsm.Result, error) {
	if owner == "" {
		owner = h.cfg.NodeID
	}
	return h.cfg.Writer.Apply(ctx, fsm.Register{Spec: spec, Owner: owner, At: at})
}

// checkOwner refuses the owner a registration names unless it is this gateway or a gateway
// that takes workers, as a transfer refuses its target (ownership.PlanTransfer): a name the mesh
// does not list (or a foreign gateway's) is 404 peer_not_found; one that is not alive, or is
// draining, 409 peer_unavailable. Otherwise nobody would probe the worker until a failover
// moved it.
func (h *Handler) checkOwner(owner string) *apiError {
	if owner == "" || owner == h.cfg.NodeID {
		return nil
	}
	var peers []Peer
	if h.cfg.Peers != nil {
		peers = h.cfg.Peers.Peers()
	}
	i := slices.IndexFunc(peers, func(p Peer) bool { return p.ID == owner && p.Status != "foreign" })
	switch {
	case i < 0:
		return errorf(fasthttp.StatusNotFound, codePeerNotFound, "owner: "+owner+" is not a peer of this mesh")
	case peers[i].Status != "alive":
		return errorf(fasthttp.StatusConflict, codePeerUnavailable, "owner: "+owner+" is "+peers[i].Status+": only an alive peer takes workers")
	case peers[i].Draining:
		return errorf(fasthttp.StatusConflict, codePeerUnavailable, "owner: "+owner+" is draining: it takes no workers")
	}
	return nil
}

// Register is POST /workers without the HTTP request, for the writers inside the gateway
// (Kubernetes discovery): spec gets the registration's defaults (this gateway's region) and is
// normalized, then registered owned by owner ("": this gateway). An identical record is
// Unchanged; one of the same id with another spec is a conflict (fsm.ErrConflict).
func (h *Handler) Register(ctx context.Context, spec worker.Spec, owner string) (fsm.Result, error) {
	spec = spec.Clone()
	if spec.Region == "" {
		spec.Region = h.cfg.Region
	}
	if e := normalize(&spec); e != nil {
		return fsm.Result{}, errors.New(e.msg)
	}
	return h.register(ctx, spec, owner, h.now())
}

// createdByFirstCopy reports whether an Unchanged registration found the record its own first
// copy created: the write was re-sent after a leader gave no answer, and the record carries
// this request's registration time to the nanosecond. Without it the client would get 200 ("the
// same spec was already registered") for the record it created.
func createdByFirstCopy(res fsm.Result, at time.Time) bool {
	return res.Outcome == fsm.Unchanged && res.Resent && res.Record != nil &&
		res.Record.RegisteredAt.UnixNano() == at.UnixNano()
}

func (h *Handler) decodeRegistration(ctx *fasthttp.RequestCtx) (worker.Spec, string, *apiError) {
	raw, e := readBody(ctx)
	if e != nil {
		return worker.Spec{}, "", e
	}
	return parseRegistration(raw, h.cfg.Region)
}

// parseRegistration decodes a POST /workers body: a worker spec and an optional "owner". The
// spec's region defaults to region; the spec comes back normalized.
func parseRegistration(raw []byte, region string) (worker.Spec, string, *apiError) {
	var body struct {
		worker.Spec
		Owner string `json:"owner"`
	}
	obj, e := decodeObject(raw)
	if e != nil {
		return body.Spec, "", e
	}
	if e := obj.only(append(slices.Clone(specFields), "owner"), `flags are set after registering, with PUT {"disabled": true} or {"is_dead": true}`); e != nil {
		return body.Spec, "", e
	}
	if e := strictDecode(raw, &body); e != nil {
		return body.Spec, "", e
	}
	if e := checkOwnerLen(body.Owner); e != nil {
		return body.Spec, "", e
	}
	if body.Region == "" {
		body.Region = region
	}
	if e := normalize(&body.Spec); e != nil {
		return body.Spec, "", e
	}
	return body.Spec, body.Owner, nil
}

// putWorker is PUT /workers/{id}: a flags-only body ({"disabled": bool} and/or
// {"is_dead": bool}, with an optional "reason") changes only the flags; a body with "url" is a
// full spec that replaces the record's (keeping its api_key when the body has none), with the
// flags of the same body in the same raft entry.
func (h *Handler) putWorker(ctx *fasthttp.RequestCtx, rec fsm.Record) {
	raw, e := readBody(ctx)
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	flags, spec, e := parsePut(raw)
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	if spec == nil {
		h.setFlags(ctx, rec, flags)
		return
	}
	region := h.cfg.Region
	h.replace(ctx, rec, flags, func(cur fsm.Record) (worker.Spec, *apiError) { return specFromPut(spec, cur, region) })
}

// parsePut splits a PUT body into its flags and, for a full spec (a body with "url"), the spec
// fields; spec is nil for a flags-only body.
func parsePut(raw []byte) (flagBody, object, *apiError) {
	obj, e := decodeObject(raw)
	if e != nil {
		return flagBody{}, nil, e
	}
	flags, e := decodeFlags(obj)
	if e != nil {
		return flags, nil, e
	}
	rest := obj.without(flagFields...)
	switch {
	case len(rest) == 0 && !flags.any():
		return flags, nil, errorf(400, codeInvalidRequest, `nothing to change: send "disabled" or "is_dead", or a full spec with "url"`)
	case len(rest) == 0:
		return flags, nil, nil
	case !rest.has("url"):
		if e := rest.only(specFields, "cannot be set with PUT"); e != nil {
			return flags, nil, e
		}
		return flags, nil, errorf(400, codeInvalidField, "url: required in a full spec; change some fields with PATCH")
	}
	return flags, rest, nil
}

// specFromPut decodes a full spec; without "api_key" the current key is kept, so that a client
// that read the record (which never shows the key) and PUTs it back does not drop it.
func specFromPut(body object, cur fsm.Record, region string) (worker.Spec, *apiError) {
	var s worker.Spec
	b, _ := json.Marshal(body)
	if e := strictDecode(b, &s); e != nil {
		return s, e
	}
	if !body.has("api_key") {
		s.APIKey = cur.Spec.APIKey
	}
	if s.Region == "" {
		s.Region = region
	}
	if e := normalize(&s); e != nil {
		return s, e
	}
	if s.ID() != cur.ID {
		return s, errorf(400, codeInvalidField, "url: names worker "+string(s.ID())+", not "+string(cur.ID)+"; register a new URL with POST /workers")
	}
	return s, nil
}

// patchWorker is PATCH /workers/{id}: the body is merged onto the current spec (JSON merge
// patch, RFC 7396: objects merge, null resets a field, lists replace), normalized, and written
// with a compare-and-set on the record's revision, with the flags of the same body in the same
// raft entry. A refused body changes nothing.
func (h *Handler) patchWorker(ctx *fasthttp.RequestCtx, rec fsm.Record) {
	raw, e := readBody(ctx)
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	flags, patch, e := parsePatch(raw)
	if e != nil {
		writeAPIErr(ctx, e)
		return
	}
	h.replace(ctx, rec, flags, func(cur fsm.Record) (worker.Spec, *apiError) { return mergeSpec(cur.Spec, patch) })
}

// parsePatch splits a PATCH body into its flags and the spec fields to merge.
func parsePatch(raw []byte) (flagBody, object, *apiError) {
	obj, e := decodeObject(raw)
	if e != nil {
		return flagBody{}, nil, e
	}
	if e := obj.only(append(slices.Clone(patchFields), flagFields...), "cannot be changed with PATCH (it is part of the worker's identity or placement)"); e != nil {
		return flagBody{}, nil, e
	}
	flags, e := decodeFlags(obj)
	if e != nil {
		return flags, nil, e
	}
	patch := obj.without(flagFields...)
	if len(patch) == 0 && !flags.any() {
		return flags, nil, errorf(400, codeInvalidRequest, "nothing to change: the body names no field")
	}
	return flags, patch, nil
}

// replace writes the spec build makes from the current record, with flags, as a compare-and-set
// on the record's revision; when the record changed in between, it reads it again and retries a
// bounded number of times.
func (h *Handler) replace(ctx *fasthttp.RequestCtx, rec fsm.Record, flags flagBody, build func(fsm.Record) (worker.Spec, *apiError)) {
	for attempt := 1; ; attempt++ {
		spec, e := build(rec)
		if e != nil {
			writeAPIErr(ctx, e)
			return
		}
		res, err := h.cfg.Writer.Apply(context.Background(), fsm.ReplaceSpec{
			ID: rec.ID, Spec: spec, ExpectedRevision: rec.Revision, Flags: h.flagChange(ctx, flags),
		})
		if errors.Is(err, fsm.ErrConflict) && attempt < casAttempts {
			// The record changed since it was read, maybe before this write was sent (this
			// gateway's copy lags the leader's): read it again as the leader has it.
			if !h.barrier(ctx) {
				return
			}
			cur, ok := h.cfg.Records.Worker(rec.ID)
			if !ok {
				err = &fsm.NotFoundError{ID: rec.ID}
			} else {
				rec = cur
				continue
			}
		}
		h.logWrite(ctx, rec.ID, res, err)
		if err != nil {
			writeError(ctx, err, codeRevisionConflict)
			return
		}
		h.writeWritten(ctx, fasthttp.StatusOK, res)
		return
	}
}

// setFlags writes a flags-only change. It needs no compare-and-set: flags are absolute values.
func (h *Handler) setFlags(ctx *fasthttp.RequestCtx, rec fsm.Record, flags flagBody) {
	res, err := h.cfg.Writer.Apply(context.Background(), fsm.SetFlags{ID: rec.ID, Flags: h.flagChange(ctx, flags)})
	h.logWrite(ctx, rec.ID, res, err)
	if err != nil {
		writeError(ctx, err, codeRevisionConflict)
		return
	}
	h.writeWritten(ctx, fasthttp.StatusOK, res)
}

// flagChange stamps a flag change with who (the caller's address) and when.
func (h *Handler) flagChange(ctx *fasthttp.RequestCtx, f flagBody) fsm.FlagChange {
	return fsm.FlagChange{Disabled: f.Disabled, IsDead: f.IsDead, Reason: f.Reason, By: caller(ctx), At: h.now()}
}

// caller names who made an admin write: the client's IP address, or "admin-api".
func caller(ctx *fasthttp.RequestCtx) string {
	if ip := ctx.RemoteIP(); ip != nil && !ip.IsUnspecified() {
		return ip.String()
	}
	return "admin-api"
}

// deleteAnswer is the body of a DELETE.
type deleteAnswer struct {
	ID string `json:"id"`
	// Status is "removed" (200: the record is gone) or "draining" (202: the record is draining
	// in raft: no gateway starts a new request to the worker, and its owner removes the record
	// once DrainSettleSecs have passed since the drain started, at DrainDeadline).
	Status          string     `json:"status"`
	DrainSettleSecs float64    `json:"drain_settle_secs"`
	DrainDeadline   *time.Time `json:"drain_deadline,omitempty"`
	// FleetAck is set once the write is committed: see Record.FleetAck.
	FleetAck *fleetack.Report `json:"fleet_ack,omitempty"`
}

// deleteWorker is DELETE /workers/{id}: a ready worker drains first (202: its record enters
// draining through raft, and its owner removes it when the settle time ends); any other is
// removed at once (200).
func (h *Handler) deleteWorker(ctx *fasthttp.RequestCtx, rec fsm.Record) {
	res, draining, err := h.remove(context.Background(), rec)
	h.logWrite(ctx, rec.ID, res, err)
	switch {
	case err != nil:
		writeError(ctx, err, codeFenced)
	case !draining:
		writeJSON(ctx, fasthttp.StatusOK, deleteAnswer{ID: string(rec.ID), Status: "removed", FleetAck: h.acknowledge(res)})
	case res.Record == nil:
		writeErr(ctx, fasthttp.StatusInternalServerError, codeInternal, "the write returned no record")
	default:
		// Once the answer is sent, no live gateway starts a new request to the worker, and the
		// intent to remove it outlives this gateway and the owner (a restart, a failover). A
		// record already draining keeps its first deadline, which the answer gives.
		writeJSON(ctx, fasthttp.StatusAccepted, deleteAnswer{ID: string(rec.ID), Status: "draining",
			DrainSettleSecs: roundSecs(res.Record.DrainSettle), DrainDeadline: timePtr(res.Record.DrainDeadline()), FleetAck: h.acknowledge(res)})
	}
}

// remove is DELETE's write: the drain of a ready worker (draining: its record enters draining
// through raft, and its owner removes it when the settle time ends), else the removal.
func (h *Handler) remove(ctx context.Context, rec fsm.Record) (res fsm.Result, draining bool, err error) {
	if settle, ok := h.drainSettle(rec); ok {
		res, err = h.cfg.Writer.Apply(ctx, fsm.Drain{ID: rec.ID, At: h.now(), Settle: settle})
		return res, true, err
	}
	res, err = h.cfg.Writer.Apply(ctx, fsm.Remove{ID: rec.ID})
	if errors.Is(err, fsm.ErrNotFound) {
		err = nil // the drain's own removal came first
		res.Outcome = fsm.Removed
	}
	return res, false, err
}

// Delete is DELETE /workers/{id} without the HTTP request, for the writers inside the gateway
// (Kubernetes discovery): a ready worker drains for its drain_settle_secs and its owner then
// removes the record (draining true); any other is removed at once. A record already gone is
// not an error.
func (h *Handler) Delete(ctx context.Context, rec fsm.Record) (res fsm.Result, draining bool, err error) {
	return h.remove(ctx, rec)
}

// drainSettle says whether a DELETE of rec drains the worker, and for how long: a record
// already draining does (its drain goes on); otherwise a ready worker, as this gateway's pool
// sees it (its own probes, or the owner's bulletins), that is not quarantined and has a
// positive settle time. Any other worker has nothing to drain.
func (h *Handler) drainSettle(rec fsm.Record) (time.Duration, bool) {
	if rec.Draining {
		return rec.DrainSettle, true
	}
	if h.cfg.DrainSettle == nil || rec.IsDead {
		return 0, false
	}
	if w := h.cfg.Pool.Get(rec.ID); w == nil || w.Health() != health.Ready {
		return 0, false
	}
	settle := h.cfg.DrainSettle(rec.Spec)
	return settle, settle > 0
}

func roundSecs(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

// logWrite logs one admin write: who, which worker, and what it came to. Never the body.
func (h *Handler) logWrite(ctx *fasthttp.RequestCtx, id worker.ID, res fsm.Result, err error) {
	args := []any{"method", string(ctx.Method()), "id", id, "by", caller(ctx)}
	if err != nil {
		h.log.Info("admin write refused", append(args, "err", err)...)
		return
	}
	h.log.Info("admin write", append(args, "outcome", res.Outcome.String(), "index", res.Index)...)
}

func (h *Handler) now() time.Time {
	if h.cfg.Now != nil {
		return h.cfg.Now()
	}
	return time.Now()
}
