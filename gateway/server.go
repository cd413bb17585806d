package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/admin"
	"github.com/meshgw/meshgw/gateway/console"
	"github.com/meshgw/meshgw/gateway/policy"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/reqmeta"
)

// Gateway is one gateway's data plane. Create it with New, add workers through Pool, serve with
// Serve, and stop with Shutdown.
type Gateway struct {
	cfg     Config
	nodeID  []byte // cfg.NodeID, for the headers
	log     *slog.Logger
	reqLog  *slog.Logger // the request log's (Config.RequestLogger)
	pool    *pool.Pool
	policy  policy.Policy
	adm     *admission
	budget  *bodyBudget
	metrics *metrics
	admin   *admin.Handler
	// console serves /ui (DESIGN.md section 19); hub feeds it, and Shutdown ends its streams.
	console *console.Handler
	hub     *console.Hub
	ready   readiness
	reqID   requestIDs

	// loc chooses a request's region before the policy picks (nil: locality routing is off);
	// locCount counts requests by region (nil: the gateway has no region).
	loc      *localityRouting
	locCount *localityCounter

	srv      *fasthttp.Server
	probeSrv *fasthttp.Server
	draining atomic.Bool
	// readinessWithdrawn: this gateway is being drained (WithdrawReadiness): readiness says
	// draining, the data plane serves on while the gateway still follows the fleet.
	readinessWithdrawn atomic.Bool
	// left: this gateway is leaving, or left, the mesh after its drain (LeaveMesh): new
	// data-plane requests answer 503 draining. refusedLeft counts those answers.
	left        atomic.Bool
	refusedLeft atomic.Uint64
	// lingering counts the refused connections reading out their client's body (closeLingering).
	lingering atomic.Int64
	lnMu      sync.Mutex
	lns       []net.Listener
	stopped   bool // Shutdown has closed the listeners
	stop      chan struct{}
	bg        sync.WaitGroup
	stopOnce  sync.Once
}

// New builds a gateway from cfg. It starts one background goroutine (the readiness refresh),
// stopped by Shutdown or Close.
func New(cfg Config) (*Gateway, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pol, err := policy.New(cfg.Policy, policy.Options{PrefixUnits: cfg.PrefixTokenCount, Seed: cfg.PolicySeed,
		CacheAware: cfg.CacheAware, Index: cfg.CacheFleet.Index, Routes: cfg.CacheFleet.Routes, Load: cfg.CacheFleet.Load,
		Now: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("policy %w", err)
	}
	g := &Gateway{cfg: cfg, nodeID: []byte(cfg.NodeID), log: cfg.Logger, reqLog: cfg.RequestLogger, policy: pol, adm: newAdmission(cfg.MaxInflight), budget: newBodyBudget(cfg.MaxBufferedBody), stop: make(chan struct{})}
	g.pool = cfg.Pool
	if g.pool == nil {
		g.pool = pool.New(pool.Config{StartPending: cfg.StartPending})
	}
	if err := g.pool.Attach(g.newUpstream, g.poolChanged); err != nil {
		return nil, err
	}
	g.metrics = newMetrics(cfg.Registerer, g.pool, g.adm, g.budget, &g.refusedLeft, cfg.Clock)
	g.loc = newLocalityRouting(&g.cfg)
	if cfg.Region != "" {
		g.locCount = newLocalityCounter(cfg.Registerer, cfg.Region)
	}
	g.reqID.init()
	acfg := cfg.Admin
	acfg.APIKey, acfg.Pool, acfg.NodeID, acfg.Status = cfg.AdminAPIKey, g.pool, cfg.NodeID, g.Status
	acfg.Left = g.left.Load // writes on a gateway that left answer 409 drained, not a retryable no_leader
	if acfg.Region == "" {
		acfg.Region = cfg.Region
	}
	if acfg.Logger == nil {
		acfg.Logger = cfg.Logger
	}
	g.admin = admin.New(acfg)
	g.hub = console.NewHub(console.HubConfig{Source: console.AdminSource(cfg.NodeID, g.admin), Logger: cfg.Logger})
	g.console = console.New(console.Config{Hub: g.hub, Auth: g.admin})
	g.refreshReadiness()
	g.srv = g.newServer(g.handle)
	g.probeSrv = g.newServer(g.handleProbeOnly)
	g.bg.Add(1)
	goSafe(g.log, "readiness", g.readinessLoop)
	return g, nil
}

// Pool returns the gateway's worker pool, through which workers are added, removed and gated.
func (g *Gateway) Pool() *pool.Pool { return g.pool }

// NodeID returns the node id the gateway stamps on answers.
func (g *Gateway) NodeID() string { return g.cfg.NodeID }

func (g *Gateway) newServer(h fasthttp.RequestHandler) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                      h,
		HeaderReceived:               g.headerReceived,
		Name:                         "meshgw",
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		MaxRequestBodySize:           int(min(g.cfg.MaxPayload, int64(^uint(0)>>1))),
		ReadBufferSize:               16 << 10,
		WriteBufferSize:              16 << 10,
		ReadTimeout:                  g.cfg.RequestTimeout,
		IdleTimeout:                  g.cfg.clientIdleTimeout,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
		ErrorHandler:                 g.serverError,
		Logger:                       fasthttpLogger{g.log},
	}
}

// Serve answers on ln until Shutdown or Close; it returns nil after a clean stop.
func (g *Gateway) Serve(ln net.Listener) error {
	if !g.track(ln) {
		return nil
	}
	return ignoreClosed(g.srv.Serve(ln))
}

// ServeProbes answers only the probe endpoints on ln (--health-check-port).
func (g *Gateway) ServeProbes(ln net.Listener) error {
	if !g.track(ln) {
		return nil
	}
	return ignoreClosed(g.probeSrv.Serve(ln))
}

// track records ln so that Shutdown closes it even when Serve had not handed it to fasthttp yet;
// after Shutdown it closes ln and reports false.
func (g *Gateway) track(ln net.Listener) bool {
	g.lnMu.Lock()
	defer g.lnMu.Unlock()
	if g.stopped {
		_ = ln.Close()
		return false
	}
	g.lns = append(g.lns, ln)
	return true
}

func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Shutdown stops the gateway gracefully: readiness turns 503 "draining" at once, the listener
// stays open for the settle window, then no new connections are taken and in-flight requests
// drain until ctx ends. It returns ctx's error when the drain did not finish in time.
func (g *Gateway) Shutdown(ctx context.Context) error {
	if g.draining.Swap(true) {
		return nil
	}
	g.refreshReadiness()
	g.log.Info("draining: readiness is now 503", "settle", g.cfg.ShutdownSettle)
	_ = g.cfg.Sleep(ctx, g.cfg.ShutdownSettle)
	g.lnMu.Lock()
	g.stopped = true
	g.lnMu.Unlock()
	g.hub.Close() // the console's streams end, or the server would wait for them
	err := g.srv.ShutdownWithContext(ctx)
	_ = g.probeSrv.ShutdownWithContext(ctx)
	g.lnMu.Lock()
	for _, ln := range g.lns {
		_ = ln.Close() // a listener fasthttp had not registered yet; the others are closed already
	}
	g.lnMu.Unlock()
	g.Close()
	return err
}

// Close stops the background goroutine and drops idle upstream connections. It does not stop
// the servers; use Shutdown for that.
func (g *Gateway) Close() {
	g.stopOnce.Do(func() {
		g.hub.Close()
		close(g.stop)
		g.bg.Wait()
		for _, w := range g.pool.Snapshot().All {
			if up := upstreamOf(w); up != nil {
				up.Close()
			}
		}
	})
}

// Draining reports whether Shutdown has begun.
func (g *Gateway) Draining() bool { return g.draining.Load() }

// WithdrawReadiness turns readiness 503 "draining" for good while the data plane goes on serving:
// the gateway is being drained (DESIGN.md section 5, Handoff), and a load balancer should take it
// out. It still follows the fleet until it leaves the mesh; LeaveMesh then refuses new model
// requests. Calling it again does nothing.
func (g *Gateway) WithdrawReadiness() {
	if g.readinessWithdrawn.Swap(true) {
		return
	}
	g.refreshReadiness()
	g.log.Info("drained: readiness is now 503 draining; the data plane serves until the gateway leaves the mesh")
}

// poolChanged runs after every snapshot swap: the auto admission limit and readiness follow the
// worker count.
func (g *Gateway) poolChanged() {
	snap := g.pool.Snapshot()
	g.adm.resize(len(snap.All))
	g.refreshReadiness()
}

// handle dispatches a request on the main listener.
func (g *Gateway) handle(ctx *fasthttp.RequestCtx) {
	path := ctx.Path()
	if r, ok := reqmeta.RouteOf(path); ok {
		g.serveModel(ctx, r)
		return
	}
	switch string(path) {
	case "/v1/models":
		if g.left.Load() {
			g.writeLeft(ctx, routeModels)
			return
		}
		g.serveModels(ctx)
	case "/liveness", "/live", "/healthz", "/health", "/readiness", "/ready":
		g.serveProbe(ctx)
	default:
		if !g.console.Serve(ctx) && !g.admin.Serve(ctx) {
			writeError(ctx, fasthttp.StatusNotFound, bodyNotFound)
		}
	}
}

func (g *Gateway) handleProbeOnly(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/liveness", "/live", "/healthz", "/health", "/readiness", "/ready":
		g.serveProbe(ctx)
	default:
		writeError(ctx, fasthttp.StatusNotFound, bodyNotFound)
	}
}

// serverError answers what fasthttp could not parse, in the OpenAI envelope.
func (g *Gateway) serverError(ctx *fasthttp.RequestCtx, err error) {
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		writeError(ctx, fasthttp.StatusRequestEntityTooLarge, bodyTooLarge(g.cfg.MaxPayload))
	case errors.Is(err, fasthttp.ErrTimeout):
		writeError(ctx, fasthttp.StatusRequestTimeout, envelope(408, typeInvalidRequest, "request read timed out"))
	default:
		writeError(ctx, fasthttp.StatusBadRequest, envelope(400, typeInvalidRequest, "malformed HTTP request"))
	}
	ctx.SetConnectionClose()
}

// goSafe runs f in a goroutine that logs and survives a panic.
func goSafe(log *slog.Logger, name string, f func()) {
	go func() {
		defer func() {
			if r := recover(); r != nil {
				log.Error("background goroutine panicked", "goroutine", name, "panic", r, "stack", string(debug.Stack()))
			}
		}()
		f()
	}()
}

// requestIDs generates X-Mesh-Request-Id values: a random per-process prefix and a counter, so
// ids are unique across gateways without a random read per request.
type requestIDs struct {
	prefix []byte
	seq    atomic.Uint64
}

func (r *requestIDs) init() {
	var b [6]byte
	_, _ = rand.Read(b[:])
	r.prefix = append([]byte("mgw-"), hex.AppendEncode(nil, b[:])...)
	r.prefix = append(r.prefix, '-')
}

// appendNext appends a fresh id to dst.
func (r *requestIDs) appendNext(dst []byte) []byte {
	dst = append(dst, r.prefix...)
	return appendHex(dst, r.seq.Add(1))
}

func appendHex(dst []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	var buf [16]byte
	i := len(buf)
	for {
		i--
		buf[i] = digits[v&15]
		v >>= 4
		if v == 0 {
			break
		}
	}
	return append(dst, buf[i:]...)
}

// fasthttpLogger routes fasthttp's own messages to slog at debug level: they are per-connection
// noise (client resets, timeouts), never state changes.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Debug("fasthttp", "msg", fmt.Sprintf(format, args...))
}
