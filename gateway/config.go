package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/ctxtime"
	"github.com/meshgw/meshgw/gateway/admin"
	"github.com/meshgw/meshgw/gateway/locality"
	"github.com/meshgw/meshgw/gateway/policy"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/prefixindex"
)

// Config configures a Gateway. Zero fields take the defaults named in their comments, which are
// SMG's, so DefaultConfig is only needed to read them.
type Config struct {
	// NodeID names this gateway in X-Mesh-Gateway and X-Mesh-Owner. Default "meshgw".
	NodeID string
	// Region is this gateway's region, reported by /status; with Locality on, requests go to
	// this region's workers first. Default "".
	Region string
	// Locality (--locality-routing, --locality-overprovisioning-factor) routes a request to
	// the workers of Region while enough of them are routable, and spills to other regions in
	// proportion below that (gateway/locality). Default: Mode auto (on when Region is set),
	// Factor 1.4.
	Locality locality.Config
	// Policy is the --policy name. Default round_robin.
	Policy string
	// PrefixTokenCount is prefix_hash's --prefix-token-count. Default 256.
	PrefixTokenCount int
	// PolicySeed makes random and power_of_two deterministic (tests). Default 0: unseeded.
	PolicySeed uint64
	// CacheAware tunes cache_aware (--cache-threshold, --balance-abs-threshold,
	// --balance-rel-threshold, --max-tree-size, --eviction-interval). Zero fields take SMG's
	// defaults (policy.CacheAwareConfig).
	CacheAware policy.CacheAwareConfig
	// CacheFleet makes cache_aware's index and load fleet-wide (--cache-scope fleet): the
	// index it shares with the gateways' cache sync, what hears its choices, and the load it
	// weighs. Nil fields keep the gateway's own (--cache-scope local).
	CacheFleet CacheFleet
	// DefaultModel (--model) is listed by GET /v1/models for routable workers that declare no
	// model. It does not narrow routing: such workers still take any model. Default "".
	DefaultModel string

	Retry RetryConfig

	// MaxInflight (--max-connections) bounds in-flight model requests. Default 0: auto, 128 per
	// worker (at least 128), capped at 4096, recomputed when the worker count changes.
	MaxInflight int
	// MaxPayload (--max-payload-size) bounds a request body, in bytes. Default 512 MiB.
	MaxPayload int64
	// MaxBufferedBody (--max-buffered-body-mb) bounds the bytes of request bodies buffered at
	// once, across every request in flight. A body larger than it is streamed to the worker
	// with a single attempt. Default DefaultMaxBufferedBody.
	MaxBufferedBody int64
	// BodyBudgetWait is how long a request waits for room in MaxBufferedBody before it is
	// answered 503 overloaded_error. Default 5 s.
	BodyBudgetWait time.Duration
	// RequestTimeout (--request-timeout-secs) bounds one upstream attempt, body included; past
	// it the client gets 504, or, the first time for a request, its retry on another worker.
	// Default 1800 s.
	RequestTimeout time.Duration
	// HungHold is how long a worker that gave a request no answer within RequestTimeout stays
	// out of this gateway's routing, unless a change of its health or of its owner's breaker
	// verdict ends the hold sooner (pool.HoldHung). Default pool.DefaultHungHold (30 s).
	HungHold time.Duration
	// ShutdownSettle is how long the listener stays open after readiness turns draining, so load
	// balancers notice before connections are refused. Default 2 s.
	ShutdownSettle time.Duration
	// AdminAPIKey is the bearer key of the admin routes; empty means loopback clients only.
	AdminAPIKey string
	// Admin gives the admin routes what the gateway does not hold: the raft records and their
	// writer, the drainer, raft's state, the mesh's peers (its APIKey, Pool, NodeID and Status
	// are the gateway's; Region and Logger default to the gateway's). GET /status summarizes
	// Admin.Raft and Admin.Peers too. Default: the routes read the pool and refuse writes.
	Admin admin.Config

	// Registerer receives the gateway's metrics. Default nil: metrics are kept but not exported.
	Registerer prometheus.Registerer
	// Logger receives logs. Default: slog.Default().
	Logger *slog.Logger
	// Sleep waits for a retry backoff or the shutdown settle window, returning early with ctx's
	// error. Default: a real timer. Tests inject one that does not wait.
	Sleep func(ctx context.Context, d time.Duration) error
	// Pool is the worker pool the gateway serves, built by the caller (pool.New) so that what
	// drives it (the owned-worker manager, the bulletin importer) can be built before the
	// gateway; New attaches the gateway's transports and change hook to it (pool.Attach), so it
	// must hold no worker yet. Default nil: New makes one, with StartPending.
	Pool *pool.Pool
	// StartPending makes a newly added worker of the pool New makes start health.Pending, for a
	// gateway whose owners check health (their verdicts then move it). False, the default,
	// starts it health.Ready: nothing checks health. Unused when Pool is set.
	StartPending bool
	// Quorum reports whether the control plane has a quorum (raft has a leader); GET /status
	// shows it. Nil: no control plane, no quorum field.
	Quorum func() bool
	// ReadinessRequiresQuorum (--readiness-requires-quorum) makes /readiness answer 503 "no
	// quorum" while Quorum reports false. Default false: a gateway serves its last applied state
	// without a leader (fail-static) and is ready when it has routable workers.
	ReadinessRequiresQuorum bool
	// Security is shown by GET /status as it is. Default nil: not shown.
	Security *SecurityStatus
	// OnReadiness is told each flip of /readiness (true: 200 ready), and its first state from
	// New, in order (meshgw's grpc.health.v1 follows it). It must not block. Default: none.
	OnReadiness func(ready bool)
	// RequestLog (--request-log) writes one route_completed or route_rejected record per model
	// request at INFO (reqlog.go); it is off while RequestLogger drops INFO. Default false.
	RequestLog bool
	// RequestLogger receives the request log's records, and says whether INFO is logged.
	// Default: Logger.
	RequestLogger *slog.Logger
	// RequestLogWriter, when set, receives the request log's records formatted by the gateway
	// itself, one Write each, byte for byte as RequestLogger's slog.TextHandler (or
	// JSONHandler, with RequestLogJSON) would write them, at a fraction of slog's cost; meshgw
	// gives it a batched writer (gateway/logbatch). RequestLogger's handler is then not called.
	// Default nil: records go through RequestLogger.
	RequestLogWriter io.Writer
	// RequestLogJSON formats RequestLogWriter's records as slog.JSONHandler does. Default
	// false: as slog.TextHandler does.
	RequestLogJSON bool
	// OnOutcome receives, once per worker a request touched, that worker's last outcome (once
	// per attempt on an external provider, whose breaker counts every failed attempt as SMG's
	// does): the status it answered, or connErr when it gave no answer (connection error,
	// timeout, or a stream cut mid-way), with status breaker.NoResponseInTime when it sent
	// nothing within RequestTimeout and breaker.NoResponse otherwise. Shedding by the gateway
	// itself reports nothing.
	// Default: no-op.
	OnOutcome func(w *pool.Worker, status int, connErr bool)

	// Clock is the time source of the metrics' bookkeeping: a removed worker's
	// meshgw_worker_retries_total is deleted breaker.RemovedSeriesTTL after a scrape first found
	// the worker gone. Default: time.Now.
	Clock func() time.Time

	// localityDraw returns the draw in [0, 1) that chooses a request's region (Locality).
	// Default: math/rand/v2's; tests fix it.
	localityDraw func() float64

	// clientWatchAfter is how long a stream runs before its client connection is watched for
	// a close (clientWatch). Default defaultClientWatchAfter; tests shorten it.
	clientWatchAfter time.Duration

	// clientIdleTimeout is how long a client's keep-alive connection may stay idle. Default
	// defaultClientIdleTimeout; tests shorten it.
	clientIdleTimeout time.Duration
}

// RetryConfig holds the retry flags.
type RetryConfig struct {
	// MaxAttempts (--retry-max-retries) is the total number of attempts. Default 5.
	MaxAttempts int
	// InitialBackoff (--retry-initial-backoff-ms). Default 50 ms.
	InitialBackoff time.Duration
	// MaxBackoff (--retry-max-backoff-ms). Default 30 s.
	MaxBackoff time.Duration
	// Multiplier (--retry-backoff-multiplier). Default 1.5.
	Multiplier float64
	// Jitter (--retry-jitter-factor) spreads each backoff by ±Jitter of itself. Default 0.2; set
	// a negative value for none.
	Jitter float64
	// Disabled (--disable-retries) makes every request a single attempt.
	Disabled bool
}

// Defaults.
const (
	DefaultPolicy           = policy.CacheAware
	DefaultPrefixTokenCount = 256
	DefaultMaxAttempts      = 5
	DefaultInitialBackoff   = 50 * time.Millisecond
	DefaultMaxBackoff       = 30 * time.Second
	DefaultMultiplier       = 1.5
	DefaultJitter           = 0.2
	DefaultMaxPayload       = 512 << 20
	DefaultMaxBufferedBody  = 1 << 30
	DefaultBodyBudgetWait   = 5 * time.Second
	DefaultRequestTimeout   = 1800 * time.Second
	DefaultShutdownSettle   = 2 * time.Second
	autoInflightPerWorker   = 128
	autoInflightCap         = 4096
)

func (c *Config) setDefaults() {
	if c.NodeID == "" {
		c.NodeID = "meshgw"
	}
	if c.Policy == "" {
		c.Policy = DefaultPolicy
	}
	if c.PrefixTokenCount <= 0 {
		c.PrefixTokenCount = DefaultPrefixTokenCount
	}
	r := &c.Retry
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	if r.InitialBackoff <= 0 {
		r.InitialBackoff = DefaultInitialBackoff
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = DefaultMaxBackoff
	}
	if r.Multiplier <= 0 {
		r.Multiplier = DefaultMultiplier
	}
	if r.Jitter == 0 {
		r.Jitter = DefaultJitter
	}
	if r.Jitter < 0 {
		r.Jitter = 0
	}
	if c.MaxPayload <= 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	if c.MaxBufferedBody <= 0 {
		c.MaxBufferedBody = DefaultMaxBufferedBody
	}
	if c.BodyBudgetWait <= 0 {
		c.BodyBudgetWait = DefaultBodyBudgetWait
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.HungHold <= 0 {
		c.HungHold = pool.DefaultHungHold
	}
	if c.ShutdownSettle < 0 {
		c.ShutdownSettle = 0
	} else if c.ShutdownSettle == 0 {
		c.ShutdownSettle = DefaultShutdownSettle
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RequestLogger == nil {
		c.RequestLogger = c.Logger
	}
	c.RequestLog = c.RequestLog && c.RequestLogger.Enabled(context.Background(), slog.LevelInfo)
	if c.Sleep == nil {
		c.Sleep = ctxtime.Sleep
	}
	if c.clientWatchAfter <= 0 {
		c.clientWatchAfter = defaultClientWatchAfter
	}
	if c.clientIdleTimeout <= 0 {
		c.clientIdleTimeout = defaultClientIdleTimeout
	}
	if c.OnOutcome == nil {
		c.OnOutcome = func(*pool.Worker, int, bool) {}
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
}

func (c *Config) validate() error {
	if c.Retry.Jitter > 1 {
		return fmt.Errorf("retry jitter %v is above 1", c.Retry.Jitter)
	}
	if c.MaxInflight < 0 {
		return fmt.Errorf("max in-flight %d is negative", c.MaxInflight)
	}
	return c.Locality.Validate()
}

// CacheFleet is what makes cache_aware fleet-wide: see policy.Options' fields of the same names.
type CacheFleet struct {
	Index  *prefixindex.Index
	Routes policy.Routes
	Load   policy.Load
}
