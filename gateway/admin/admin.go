// Package admin serves the gateway's admin API (DESIGN.md section 9, docs/admin-api.md): the
// worker records kept in raft, read and written over HTTP, behind a bearer key or, without one,
// for loopback clients only.
package admin

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/worker"
)

// Records are the applied raft worker records the routes read; *consensus.Node implements it.
type Records interface {
	Worker(id worker.ID) (fsm.Record, bool)
	Workers() []fsm.Record
}

// Writer proposes a raft command and returns its result, bounded in time when ctx is not;
// *gateway/fleet.Writer implements it.
type Writer interface {
	Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error)
}

// RaftInfo answers GET /mesh/raft; *consensus.Node implements it.
type RaftInfo interface {
	Info() (consensus.Info, error)
}

// Config configures a Handler.
type Config struct {
	// APIKey is the bearer key (--admin-api-key); empty admits loopback clients only. It may
	// hold several keys, one a line (a rotation: --admin-api-key-file), and each opens the
	// routes.
	APIKey string
	// Pool is the worker pool: the runtime state of each record.
	Pool *pool.Pool
	// NodeID is this gateway's node id: the owner of what it registers.
	NodeID string
	// Region is this gateway's region, the default of a registration's region.
	Region string
	// Status renders GET /status.
	Status func() any

	// Records and Writer back the worker routes with raft. Nil Records: the routes read the
	// pool, and the write routes answer 503 unavailable (a gateway without a raft node).
	Records Records
	Writer  Writer
	// Fleet makes writes fleet-acknowledged and judged against the leader's state, and
	// serves ?consistent=true. A write is decided by the leader's FSM (existence, the
	// compare-and-set revision); where this gateway decides from its own copy (a record it does
	// not find, a revision that moved) it runs a read barrier first. Nil: a write returns once
	// the leader applied it, and is judged against this gateway's state; ?consistent=true reads
	// the local state.
	Fleet Fleet
	// DrainSettle returns how long a DELETE of a ready worker of spec drains before its owner
	// removes the record (the worker's health.drain_settle_secs, else --drain-settle-secs): the
	// record then enters draining through raft, and the owner, whichever gateway that is, removes
	// it once the settle has passed. Nil: DELETE removes the record at once (a gateway that runs
	// no health checks, so no owner that would finish a drain).
	DrainSettle func(spec worker.Spec) time.Duration
	// Raft answers GET /mesh/raft. Nil: 503 unavailable.
	Raft RaftInfo
	// Peers answers GET /mesh/peers. Nil: 503 unavailable.
	Peers Peers
	// Runtime supplies the health and breaker state of owned workers for GET /workers. Nil:
	// records show only the pool's view.
	Runtime Runtime
	// Imports supplies the state imported from the owners' bulletins for the workers other
	// gateways own. Nil: those show health and breaker "unknown".
	Imports Imports
	// Weights runs POST /update_weights_from_disk. Nil: 503 not_durable (--ephemeral).
	Weights WeightUpdates
	// Journal serves GET /weight_update_journal. Nil: an empty list.
	Journal Journal
	// Ownership moves workers for POST /workers/{id}/transfer and POST /mesh/rebalance. Nil:
	// those answer 503 unavailable.
	Ownership Ownership
	// Drainer, Drains and Peers serve POST /mesh/drain, which waits up to DrainTimeout
	// (--drain-timeout-secs) for the drained gateways to hand everything over and leave; Drains
	// serves GET /mesh/drain. Nil: those answer 503 unavailable.
	Drainer      Drainer
	Drains       Drains
	DrainTimeout time.Duration

	// Left reports whether this gateway was drained and has left the mesh (gateway.Gateway's
	// LeaveMesh): its raft node never has a leader again, so writes and reads through the
	// leader answer 409 drained rather than a 503 no_leader a client would retry. Nil: never.
	Left func() bool

	// Logger receives one line per admin write. Nil means slog.Default().
	Logger *slog.Logger
	// Now stamps registrations and flag changes. Nil means time.Now.
	Now func() time.Time
}

// Handler serves the admin routes.
type Handler struct {
	cfg  Config
	log  *slog.Logger
	keys [][]byte // each bearer key; nil without a key
}

// New returns a Handler.
func New(cfg Config) *Handler {
	h := &Handler{cfg: cfg, log: cfg.Logger}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.log = h.log.With("component", "admin")
	for _, k := range strings.Split(cfg.APIKey, "\n") {
		if k = strings.TrimSpace(k); k != "" {
			h.keys = append(h.keys, []byte(k))
		}
	}
	return h
}

// route is one admin path: its handlers by method.
type route struct {
	get, post func(*fasthttp.RequestCtx)
	// worker routes take the record the path names.
	getW, put, patch, del func(*fasthttp.RequestCtx, fsm.Record)
}

// Serve answers ctx when its path is an admin route, or under an admin prefix (404 not_found),
// and reports whether it was one.
func (h *Handler) Serve(ctx *fasthttp.RequestCtx) bool {
	path := string(ctx.Path())
	var rt route
	known := true
	switch {
	case path == "/status":
		rt = route{get: h.status}
	case path == "/workers":
		rt = route{get: h.listWorkers, post: h.writing(h.registerWorker)}
	case path == "/mesh/raft":
		rt = route{get: h.raftInfo}
	case path == "/mesh/peers":
		rt = route{get: h.meshPeers}
	case path == "/mesh/owners":
		rt = route{get: h.meshOwners}
	case path == "/update_weights_from_disk":
		rt = route{post: h.writing(h.updateWeights)}
	case path == "/weight_update_journal":
		rt = route{get: h.getJournal}
	case path == "/weight_update_journal/resolve":
		rt = route{post: h.writing(h.resolveJournal)}
	case path == "/mesh/drain":
		rt = route{get: h.drainProgress, post: h.writing(h.drainPeers)}
	case path == "/mesh/rebalance":
		rt = route{post: h.writing(h.rebalance)}
	case isTransfer(path):
		rt = route{post: h.writing(h.transferWorker)}
	case strings.HasPrefix(path, "/workers/"):
		rt = route{getW: h.getWorker, put: h.writingW(h.putWorker), patch: h.writingW(h.patchWorker), del: h.writingW(h.deleteWorker)}
	case underAdminPrefix(path):
		known = false
	default:
		return false
	}
	// GET /status is a status endpoint (DESIGN.md section 10), like /readiness: it shows counts
	// and the node's identity, never a record or a secret, so load balancers and dashboards read
	// it without the admin key.
	if path != "/status" && !h.authorized(ctx) {
		return true
	}
	if rt.getW != nil {
		_, known = workerRef(ctx)
	}
	if !known {
		writeErr(ctx, fasthttp.StatusNotFound, codeNotFound, "no admin route "+safeRef(path))
		return true
	}
	h.dispatch(ctx, rt)
	return true
}

// adminPrefixes are the first path segments of the admin routes (but /status, a status
// endpoint): every path under one is the admin API's, so that one it does not serve answers 404
// not_found in the admin envelope, after authentication like any other.
var adminPrefixes = []string{"/workers", "/mesh", "/weight_update_journal", "/update_weights_from_disk"}

// underAdminPrefix reports whether path is an admin prefix or under one.
func underAdminPrefix(path string) bool {
	for _, p := range adminPrefixes {
		if rest, ok := strings.CutPrefix(path, p); ok && (rest == "" || rest[0] == '/') {
			return true
		}
	}
	return false
}

// dispatch picks the route's handler for the method, or answers 405 naming the allowed ones.
func (h *Handler) dispatch(ctx *fasthttp.RequestCtx, rt route) {
	method := string(ctx.Method())
	if method == fasthttp.MethodHead {
		method = fasthttp.MethodGet
	}
	plain := map[string]func(*fasthttp.RequestCtx){fasthttp.MethodGet: rt.get, fasthttp.MethodPost: rt.post}
	onWorker := map[string]func(*fasthttp.RequestCtx, fsm.Record){
		fasthttp.MethodGet: rt.getW, fasthttp.MethodPut: rt.put, fasthttp.MethodPatch: rt.patch, fasthttp.MethodDelete: rt.del,
	}
	if method == fasthttp.MethodGet && (plain[method] != nil || onWorker[method] != nil) && !h.consistentRead(ctx) {
		return
	}
	if f := plain[method]; f != nil {
		f(ctx)
		return
	}
	if f := onWorker[method]; f != nil {
		ref, _ := workerRef(ctx) // checked by Serve
		rec, e := h.resolve(ref)
		if e != nil && e.code == codeWorkerNotFound && method != fasthttp.MethodGet && h.writable() {
			// This gateway's copy may lag the leader's: judge the write as the leader has it.
			if !h.barrier(ctx) {
				return
			}
			rec, e = h.resolve(ref)
		}
		if e != nil {
			writeAPIErr(ctx, e)
			return
		}
		f(ctx, rec)
		return
	}
	var allowed []string
	for _, m := range []string{fasthttp.MethodGet, fasthttp.MethodPost, fasthttp.MethodPut, fasthttp.MethodPatch, fasthttp.MethodDelete} {
		if plain[m] != nil || onWorker[m] != nil {
			allowed = append(allowed, m)
		}
	}
	ctx.Response.Header.Set(fasthttp.HeaderAllow, strings.Join(allowed, ", "))
	writeErr(ctx, fasthttp.StatusMethodNotAllowed, codeMethodNotAllowed,
		method+" is not served on "+string(ctx.Path())+"; allowed: "+strings.Join(allowed, ", "))
}

// consistentRead runs the read barrier of a GET with ?consistent=true; it answers the error
// itself and reports whether to go on.
func (h *Handler) consistentRead(ctx *fasthttp.RequestCtx) bool {
	consistent, e := wantsConsistent(ctx)
	if e != nil {
		writeAPIErr(ctx, e)
		return false
	}
	return !consistent || h.barrier(ctx)
}

// writable reports whether the write routes are backed by raft.
func (h *Handler) writable() bool { return h.cfg.Records != nil && h.cfg.Writer != nil }

// writing refuses a write on a gateway without raft, or on one that left the mesh.
func (h *Handler) writing(f func(*fasthttp.RequestCtx)) func(*fasthttp.RequestCtx) {
	return func(ctx *fasthttp.RequestCtx) {
		switch {
		case !h.writable():
			writeErr(ctx, fasthttp.StatusServiceUnavailable, codeUnavailable, "this gateway runs without a raft node; the admin API is read-only")
		case h.left():
			writeAPIErr(ctx, errLeft)
		default:
			f(ctx)
		}
	}
}

// errLeft refuses a write, or a read through the raft leader, on a gateway that was drained
// and left the mesh. It is no 503: retrying here never helps, the raft group removed it.
var errLeft = errorf(fasthttp.StatusConflict, codeDrained, "this gateway was drained and has left the mesh: "+
	"it has no raft leader and never will again; nothing was written; send the request to another gateway of the mesh")

// left reports whether this gateway was drained and has left the mesh.
func (h *Handler) left() bool { return h.cfg.Left != nil && h.cfg.Left() }

func (h *Handler) writingW(f func(*fasthttp.RequestCtx, fsm.Record)) func(*fasthttp.RequestCtx, fsm.Record) {
	return func(ctx *fasthttp.RequestCtx, rec fsm.Record) {
		h.writing(func(ctx *fasthttp.RequestCtx) { f(ctx, rec) })(ctx)
	}
}

// authorized checks the bearer key in constant time, or the client's address when no key is
// configured; it writes the 401/403 itself. A client certificate that the TLS handshake
// verified (--tls-http takes only the cluster CA's) opens the routes as the key does.
func (h *Handler) authorized(ctx *fasthttp.RequestCtx) bool {
	if st := ctx.TLSConnectionState(); st != nil && len(st.VerifiedChains) > 0 {
		return true
	}
	if h.keys == nil {
		if ctx.RemoteIP().IsLoopback() {
			return true
		}
		writeErr(ctx, fasthttp.StatusForbidden, codeForbidden, "admin routes answer only loopback clients when no admin API key is configured")
		return false
	}
	got, isBearer := bearerCredentials(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization))
	match := 0
	for _, k := range h.keys { // every key compared, in constant time each
		match |= subtle.ConstantTimeCompare(got, k)
	}
	if !isBearer || match != 1 {
		ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="meshgw-admin"`)
		writeErr(ctx, fasthttp.StatusUnauthorized, codeUnauthorized, "missing or wrong admin bearer key")
		return false
	}
	return true
}

// bearerCredentials returns what follows the scheme of an Authorization header, and whether the
// scheme is Bearer: in any case, followed by one or more spaces (RFC 7235, section 2.1).
func bearerCredentials(header []byte) ([]byte, bool) {
	scheme, rest, ok := bytes.Cut(header, []byte(" "))
	if !ok || !bytes.EqualFold(scheme, []byte("Bearer")) {
		return nil, false
	}
	return bytes.TrimLeft(rest, " "), true
}

func (h *Handler) status(ctx *fasthttp.RequestCtx) { writeJSON(ctx, fasthttp.StatusOK, h.cfg.Status()) }

// raftInfo is GET /mesh/raft: leader, term, applied index and the raft configuration.
func (h *Handler) raftInfo(ctx *fasthttp.RequestCtx) {
	if h.cfg.Raft == nil {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, codeUnavailable, "this gateway runs without a raft node")
		return
	}
	info, err := h.cfg.Raft.Info()
	if err != nil {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, codeUnavailable, "raft state unavailable: "+err.Error())
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, info)
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeErr(ctx, fasthttp.StatusInternalServerError, codeInternal, "cannot render the answer")
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
