// Package admin serves the gateway's admin routes (GET /workers, GET /workers/{id}, GET /status
// for now; the raft-backed writes come later), behind a bearer key or, without one, loopback only.
package admin

import (
	"crypto/subtle"
	"encoding/json"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/pool"
)

// Config configures a Handler.
type Config struct {
	// APIKey is the bearer key (--admin-api-key); empty admits loopback clients only.
	APIKey string
	// Pool is the worker pool the routes read.
	Pool *pool.Pool
	// NodeID is this gateway's node id, the owner of its local workers until ownership exists.
	NodeID string
	// Status renders GET /status.
	Status func() any
}

// Handler serves the admin routes.
type Handler struct {
	cfg    Config
	bearer []byte
}

// New returns a Handler.
func New(cfg Config) *Handler {
	h := &Handler{cfg: cfg}
	if cfg.APIKey != "" {
		h.bearer = []byte("Bearer " + cfg.APIKey)
	}
	return h
}

// Serve answers ctx when its path is an admin route and reports whether it was one.
func (h *Handler) Serve(ctx *fasthttp.RequestCtx) bool {
	path := string(ctx.Path())
	var serve func(*fasthttp.RequestCtx)
	switch {
	case path == "/status":
		serve = h.status
	case path == "/workers":
		serve = h.listWorkers
	case strings.HasPrefix(path, "/workers/"):
		serve = h.getWorker
	default:
		return false
	}
	if !h.authorized(ctx) {
		return true
	}
	if !ctx.IsGet() && !ctx.IsHead() {
		writeErr(ctx, fasthttp.StatusMethodNotAllowed, "method_not_allowed", "only GET is served on "+path+" for now")
		return true
	}
	serve(ctx)
	return true
}

// authorized checks the bearer key in constant time, or the client's address when no key is
// configured; it writes the 401/403 itself.
func (h *Handler) authorized(ctx *fasthttp.RequestCtx) bool {
	if h.bearer == nil {
		if ctx.RemoteIP().IsLoopback() {
			return true
		}
		writeErr(ctx, fasthttp.StatusForbidden, "forbidden", "admin routes answer only loopback clients when no admin API key is configured")
		return false
	}
	got := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	if subtle.ConstantTimeCompare(got, h.bearer) != 1 {
		ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="meshgw-admin"`)
		writeErr(ctx, fasthttp.StatusUnauthorized, "unauthorized", "missing or wrong admin bearer key")
		return false
	}
	return true
}

func (h *Handler) status(ctx *fasthttp.RequestCtx) { writeJSON(ctx, fasthttp.StatusOK, h.cfg.Status()) }

func (h *Handler) listWorkers(ctx *fasthttp.RequestCtx) {
	model := string(ctx.QueryArgs().Peek("model"))
	snap := h.cfg.Pool.Snapshot()
	out := WorkerList{Workers: make([]Record, 0, len(snap.All))}
	for _, w := range snap.All {
		if model != "" && !w.ServesModel([]byte(model)) {
			continue
		}
		out.Workers = append(out.Workers, h.record(w))
	}
	out.Total = len(out.Workers)
	writeJSON(ctx, fasthttp.StatusOK, out)
}

func (h *Handler) getWorker(ctx *fasthttp.RequestCtx) {
	// The raw path keeps a percent-encoded URL intact (the parsed path would decode its slashes).
	ref := string(ctx.Request.URI().PathOriginal())
	ref, _, _ = strings.Cut(ref, "?")
	ref = strings.TrimPrefix(ref, "/workers/")
	w := h.cfg.Pool.Snapshot().Lookup(ref)
	if w == nil {
		writeErr(ctx, fasthttp.StatusNotFound, "worker_not_found", "no worker with id or URL "+ref)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, h.record(w))
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeErr(ctx, fasthttp.StatusInternalServerError, "internal", "cannot render the answer")
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// writeErr writes the admin error body {"error":{"message","code"}} with a stable code.
func writeErr(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	b, _ := json.Marshal(map[string]map[string]string{"error": {"message": msg, "code": code}})
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
