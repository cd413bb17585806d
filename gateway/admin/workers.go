package admin

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/worker"
)

// listWorkers is GET /workers[?model=]: every record with its runtime state, sorted by id. A
// host-local (ipc://) worker another gateway owns is not listed: this gateway cannot reach it
// and does not import it (DESIGN.md section 4); GET /workers/{id} and /mesh/owners still show
// its record.
func (h *Handler) listWorkers(ctx *fasthttp.RequestCtx) {
	model := string(ctx.QueryArgs().Peek("model"))
	snap := h.cfg.Pool.Snapshot()
	recs := h.records()
	out := WorkerList{Workers: make([]Record, 0, len(recs))}
	for i := range recs {
		rec := &recs[i]
		if models := rec.Spec.ModelList(); model != "" && len(models) > 0 && !slices.Contains(models, model) {
			continue
		}
		if rec.Owner != h.cfg.NodeID && rec.Spec.HostLocal() {
			continue
		}
		out.Workers = append(out.Workers, h.record(rec, snap.Get(rec.ID)))
	}
	out.Total = len(out.Workers)
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// getWorker is GET /workers/{id}: the record with this gateway's runtime state of it.
func (h *Handler) getWorker(ctx *fasthttp.RequestCtx, rec fsm.Record) {
	writeJSON(ctx, fasthttp.StatusOK, h.record(&rec, h.cfg.Pool.Get(rec.ID)))
}

// records returns the applied raft records, or, on a gateway without a raft node, the pool's
// workers in their place.
func (h *Handler) records() []fsm.Record {
	if h.cfg.Records != nil {
		return h.cfg.Records.Workers()
	}
	snap := h.cfg.Pool.Snapshot()
	out := make([]fsm.Record, 0, len(snap.All))
	for _, w := range snap.All {
		out = append(out, poolRecord(w, h.cfg.NodeID))
	}
	return out
}

// poolRecord stands in for the raft record of a pool worker on a gateway without raft.
func poolRecord(w *pool.Worker, nodeID string) fsm.Record {
	owner := w.Owner()
	if owner == "" {
		owner = nodeID
	}
	g := w.Gates()
	return fsm.Record{ID: w.ID, Spec: w.Spec(), Owner: owner, Disabled: g&pool.GateDisabled != 0, IsDead: g&pool.GateDead != 0}
}

func (h *Handler) lookup(id worker.ID) (fsm.Record, bool) {
	if h.cfg.Records != nil {
		return h.cfg.Records.Worker(id)
	}
	if w := h.cfg.Pool.Get(id); w != nil {
		return poolRecord(w, h.cfg.NodeID), true
	}
	return fsm.Record{}, false
}

// workerRef returns what follows /workers/ in the raw path (a percent-encoded URL stays intact),
// and false when the path names a sub-route rather than a worker.
func workerRef(ctx *fasthttp.RequestCtx) (string, bool) {
	ref := string(ctx.Request.URI().PathOriginal())
	ref, _, _ = strings.Cut(ref, "?")
	ref = strings.TrimPrefix(ref, "/workers/")
	if ref == "" || (strings.Contains(ref, "/") && !strings.Contains(ref, "://")) {
		return "", false
	}
	return ref, true
}

// resolve finds the record ref names: its id, or its URL (percent-encoded or not; compared in
// canonical form). A URL shared by several data-parallel ranks is ambiguous.
func (h *Handler) resolve(ref string) (fsm.Record, *apiError) {
	if rec, ok := h.lookup(worker.ID(ref)); ok {
		return rec, nil
	}
	if dec, err := url.PathUnescape(ref); err == nil && dec != ref {
		ref = dec
		if rec, ok := h.lookup(worker.ID(ref)); ok {
			return rec, nil
		}
	}
	notFound := errorf(fasthttp.StatusNotFound, codeWorkerNotFound, "no worker with id or URL "+safeRef(ref))
	if !strings.Contains(ref, "://") {
		return fsm.Record{}, notFound
	}
	for _, allowPath := range []bool{false, true} {
		canon, err := worker.CanonicalURL(ref, allowPath)
		if err != nil {
			continue
		}
		var found []fsm.Record
		for _, rec := range h.records() {
			if rec.Spec.URL == canon {
				found = append(found, rec)
			}
		}
		switch len(found) {
		case 0:
		case 1:
			return found[0], nil
		default:
			return fsm.Record{}, errorf(fasthttp.StatusBadRequest, codeInvalidRequest,
				"URL "+canon+" names several data-parallel ranks; use the worker id")
		}
	}
	return fsm.Record{}, notFound
}

// safeRef keeps a client's reference short in an error message and, unless it is a worker id,
// free of what may carry a credential (a URL's user info, query and fragment).
func safeRef(ref string) string {
	if !isWorkerID(ref) {
		ref = worker.RedactURL(ref)
	}
	if len(ref) > 200 {
		ref = ref[:200] + "..."
	}
	return ref
}

// isWorkerID reports whether ref has the form of a worker id (worker.NewID): "w-" and 12 hex
// digits, then "@RANK" for a data-parallel rank. Its "@" is not a URL's user info.
func isWorkerID(ref string) bool {
	rest, ok := strings.CutPrefix(ref, "w-")
	if !ok {
		return false
	}
	digest, rank, ranked := strings.Cut(rest, "@")
	if len(digest) != 12 || strings.Trim(digest, "0123456789abcdef") != "" {
		return false
	}
	if !ranked {
		return true
	}
	n, err := strconv.Atoi(rank)
	return err == nil && n >= 0 && strconv.Itoa(n) == rank
}
