package gateway

import (
	"errors"
	"io"
	"net/url"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/worker"
)

// Connection pool sizing per worker.
const (
	upstreamMaxConns     = 2048
	upstreamConnWait     = 10 * time.Second
	upstreamIdleDuration = 4 * time.Second // below uvicorn's 5 s keep-alive, so pooled connections are rarely stale
	upstreamBufferSize   = 16 << 10
)

// upstream is what the data plane attaches to each worker: a keep-alive connection pool (or,
// for gRPC and ZMQ workers, their client) and the worker's pre-resolved metric children.
type upstream struct {
	hc      *fasthttp.HostClient // HTTP workers
	rpc     rpcTransport         // gRPC and ZMQ workers (hc is nil)
	host    string               // host:port for the Host header
	auth    []byte               // "Bearer <api key>", nil when the worker has none
	retries prometheus.Counter
	// retryable are the statuses retried on this worker (its resilience override, else the
	// defaults).
	retryable []int
	maxTries  int // per-worker attempt cap, 0 for none
	noRetry   bool
}

var defaultRetryable = []int{408, 429, 500, 502, 503, 504}

func (g *Gateway) newUpstream(w *pool.Worker) pool.Transport {
	u, _ := url.Parse(w.URL)
	up := &upstream{
		host:      u.Host,
		retries:   g.metrics.retries.WithLabelValues(w.URL),
		retryable: defaultRetryable,
	}
	switch w.Spec().ConnectionMode {
	case worker.ModeGRPC:
		up.rpc = g.newGRPCTransport(u.Host)
	case worker.ModeZMQ:
		up.rpc = g.newZMQTransport(w.URL)
	default:
		up.hc = g.newHostClient(u)
	}
	if k := w.APIKey(); k != "" {
		up.auth = []byte("Bearer " + k)
	}
	if r := w.Resilience(); r != nil {
		if len(r.RetryableStatusCodes) > 0 {
			up.retryable = slices.Clone(r.RetryableStatusCodes)
		}
		if r.MaxRetries != nil {
			up.maxTries = *r.MaxRetries
		}
		up.noRetry = r.DisableRetry != nil && *r.DisableRetry
	}
	return up
}

// newHostClient is an HTTP worker's keep-alive connection pool.
func (g *Gateway) newHostClient(u *url.URL) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                     u.Host,
		Name:                     "meshgw",
		IsTLS:                    u.Scheme == "https",
		MaxConns:                 upstreamMaxConns,
		MaxConnWaitTimeout:       upstreamConnWait,
		MaxIdleConnDuration:      upstreamIdleDuration,
		ReadTimeout:              g.cfg.RequestTimeout,
		WriteTimeout:             g.cfg.RequestTimeout,
		ReadBufferSize:           upstreamBufferSize,
		WriteBufferSize:          upstreamBufferSize,
		NoDefaultUserAgentHeader: true,
		DisablePathNormalizing:   true,
		RetryIfErr:               retryStaleConn,
	}
}

// Close drops the idle connections; requests in flight finish on theirs.
func (u *upstream) Close() {
	if u.rpc != nil {
		u.rpc.close()
		return
	}
	u.hc.CloseIdleConnections()
}

// retryStaleConn lets fasthttp resend once on a connection that closed before answering, which
// is how a keep-alive connection the worker timed out shows up. Anything else is left to the
// gateway's own retry loop, which picks a worker again.
func retryStaleConn(_ *fasthttp.Request, attempts int, err error) (bool, bool) {
	return false, attempts < 2 && (errors.Is(err, fasthttp.ErrConnectionClosed) || errors.Is(err, io.EOF))
}

func (u *upstream) isRetryable(status int) bool { return slices.Contains(u.retryable, status) }

// attemptLimit is the number of attempts a request may make when its last attempt failed on
// this worker.
func (u *upstream) attemptLimit(global int) int {
	if u.noRetry {
		return 1
	}
	if u.maxTries > 0 && u.maxTries < global {
		return u.maxTries
	}
	return global
}

func upstreamOf(w *pool.Worker) *upstream {
	up, _ := w.Transport().(*upstream)
	return up
}
