package gateway

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

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
// for gRPC and ZMQ workers, their client) and the worker's settings.
//
// The connection pool or client is made at the worker's first request (ready), not when the
// worker is added: a gateway that imports 100,000 workers keeps none for those it never routes
// to, and starts without making 100,000 of them.
type upstream struct {
	once sync.Once
	open func(*upstream)      // sets hc or rpc; run once by ready
	hc   *fasthttp.HostClient // HTTP workers, once ready
	rpc  rpcTransport         // gRPC and ZMQ workers (hc is nil), once ready
	// streamed is an HTTP worker's pool for request bodies sent as they arrive, made at the
	// first such request (streamedClient): hc's connections wait for the answer in a write
	// that looks like a whole request, as a streamed body's first chunk does.
	streamed atomic.Pointer[fasthttp.HostClient]
	// provider is set, once ready, for external providers: their endpoints and auth header.
	provider *provider
	host     string // host:port for the Host header
	// scheme is the worker's, "http" or "https": the request keeps the scheme it came in with
	// (https under --tls-http), which fasthttp would refuse to send to a worker of the other.
	scheme   string
	auth     []byte // "Bearer <api key>", nil when the worker has none
	maxTries int    // per-worker attempt cap, 0 for none
	noRetry  bool
}

func (g *Gateway) newUpstream(w *pool.Worker) pool.Transport {
	u, _ := url.Parse(w.URL)
	up := &upstream{host: u.Host, scheme: "http"}
	if u.Scheme == "https" {
		up.scheme = "https"
	}
	// The closures keep strings, not u: a parsed URL per imported worker is memory for nothing.
	switch host, tls, raw := u.Host, u.Scheme == "https", w.URL; w.ConnectionMode() {
	case worker.ModeGRPC:
		up.open = func(up *upstream) { up.rpc = g.newGRPCTransport(host) }
	case worker.ModeZMQ:
		up.open = func(up *upstream) { up.rpc = g.newZMQTransport(raw) }
	case worker.ModeExternal:
		kind, key, models := w.Provider(), w.APIKey(), w.Models
		up.open = func(up *upstream) {
			up.hc = g.newHostClient(host, tls, false)
			up.provider = newProvider(raw, kind, key, models)
		}
	default:
		up.open = func(up *upstream) { up.hc = g.newHostClient(host, tls, false) }
	}
	if k := w.APIKey(); k != "" {
		up.auth = []byte("Bearer " + k)
	}
	// A worker's retryable_status_codes does not change what is retried (retryableStatus); it
	// only tells its breaker which answers are failures (breaker.Classifier).
	if r := w.Resilience(); r != nil {
		if r.MaxRetries != nil {
			up.maxTries = *r.MaxRetries
		}
		up.noRetry = r.DisableRetry != nil && *r.DisableRetry
	}
	return up
}

// newHostClient is an HTTP worker's keep-alive connection pool. It adds no User-Agent: an engine
// gets the client's, or none (X-Mesh-Gateway names the gateway). Over plain TCP, and unless
// streamed (a pool for request bodies sent as they arrive), its connections wait for the
// answer in the write of a whole request (awaitAnswers).
func (g *Gateway) newHostClient(host string, tls, streamed bool) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                     host,
		IsTLS:                    tls,
		MaxConns:                 upstreamMaxConns,
		MaxConnWaitTimeout:       upstreamConnWait,
		MaxIdleConnDuration:      upstreamIdleDuration,
		ReadTimeout:              g.cfg.RequestTimeout,
		WriteTimeout:             g.cfg.RequestTimeout,
		Dial:                     upstreamDial(defaultDial(tls), deadlineSlack(g.cfg.RequestTimeout), !tls && !streamed),
		ReadBufferSize:           upstreamBufferSize,
		WriteBufferSize:          upstreamBufferSize,
		NoDefaultUserAgentHeader: true,
		DisablePathNormalizing:   true,
		RetryIfErr:               retryStaleConn,
	}
}

// defaultDial is what HostClient dials with when its Dial is nil and a request has no timeout
// of its own (meshgw's have none): fasthttp's default dialer, after adding the scheme's port to
// an address without one.
func defaultDial(tls bool) fasthttp.DialFunc {
	return func(addr string) (net.Conn, error) { return fasthttp.Dial(fasthttp.AddMissingPort(addr, tls)) }
}

// upstreamDial wraps the connections dial makes so that their deadlines are armed lazily
// (lazyDeadlineConn), and with await, so that the write of a whole request waits for the
// answer (awaitAnswers; only with a request timeout, which bounds that wait).
func upstreamDial(dial fasthttp.DialFunc, slack time.Duration, await bool) fasthttp.DialFunc {
	return func(addr string) (net.Conn, error) {
		c, err := dial(addr)
		if err != nil {
			return nil, err
		}
		lc := lazyDeadline(c, slack)
		if l, ok := lc.(*lazyDeadlineConn); ok && await {
			l.awaitAnswers(upstreamBufferSize)
		}
		return lc, nil
	}
}

// streamedClient is the worker's pool for a request whose body is sent as it arrives: its
// writes flush each chunk of the body, the first with the headers, and a connection that took
// that first write for a whole request would wait for an answer until the request timeout.
// Made at the first such request, which is rare (a body larger than the whole buffered-body
// budget).
func (g *Gateway) streamedClient(up *upstream) *fasthttp.HostClient {
	if hc := up.streamed.Load(); hc != nil {
		return hc
	}
	hc := g.newHostClient(up.host, up.scheme == "https", true)
	if !up.streamed.CompareAndSwap(nil, hc) {
		return up.streamed.Load()
	}
	return hc
}

// ready makes the transport on the first call; after it, exactly one of hc and rpc is set.
func (u *upstream) ready() {
	u.once.Do(func() { u.open(u) })
}

// Close drops the idle connections; requests in flight finish on theirs. An upstream that never
// served a request has nothing to close, and any request that still reaches it fails as closed.
func (u *upstream) Close() {
	u.once.Do(func() { u.rpc = brokenTransport{err: errTransportClosed} })
	if u.rpc != nil {
		u.rpc.close()
		return
	}
	u.hc.CloseIdleConnections()
	if hc := u.streamed.Load(); hc != nil {
		hc.CloseIdleConnections()
	}
}

// retryStaleConn lets fasthttp resend once on a connection that closed before answering, which
// is how a keep-alive connection the worker timed out shows up. Anything else is left to the
// gateway's own retry loop, which picks a worker again.
func retryStaleConn(_ *fasthttp.Request, attempts int, err error) (bool, bool) {
	return false, attempts < 2 && (errors.Is(err, fasthttp.ErrConnectionClosed) || errors.Is(err, io.EOF))
}

// retryableStatus reports whether an attempt answered with status is retried: 408, 429, 500,
// 502, 503 and 504, whatever the worker's retryable_status_codes say. That list only classifies
// outcomes for the worker's circuit breaker, as in SMG, despite its name; a worker narrows or
// stops retries with max_retries and disable_retry.
func retryableStatus(status int) bool {
	switch status {
	case 408, 429, 500, 502, 503, 504:
		return true
	}
	return false
}

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
