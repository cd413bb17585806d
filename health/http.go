package health

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// HTTPProber probes an engine with GET url + endpoint (--health-check-endpoint), the worker's
// API key as a bearer token and this gateway's node id as X-Mesh-Gateway. 2xx within the timeout
// is healthy; a redirect is judged as it is, not followed. The zero value is ready to use.
//
// By default probes speak HTTP/1.1 over a keep-alive pool shared by every engine probe: at most 2
// idle connections per host and 4096 in all, each closed after 90 s unused, https verified with
// the system roots. fasthttp writes and parses the messages; a probe runs in its caller's
// goroutine, no goroutine waits on an idle connection, and the end of the probe's context aborts
// it at once. At most 64 KiB of an answer's body is read, so that its connection serves the next
// probe; a larger body, a head larger than the 4 KiB read buffer or an answer that closes the
// connection is judged by its status alone, and its connection closed.
type HTTPProber struct {
	// Client, when set, sends the probes through net/http instead (its Transport and redirect
	// policy apply). Default nil: the shared pool above.
	Client *http.Client

	pool *enginePool // nil: the shared pool (tests use their own)
}

// Probe implements Prober.
func (p *HTTPProber) Probe(ctx context.Context, t Target) error {
	path := t.Endpoint
	if path == "" {
		path = "/health"
	}
	var code int
	var err error
	if p.Client != nil {
		code, err = probeClient(ctx, p.Client, t, path)
	} else {
		pool := p.pool
		if pool == nil {
			pool = sharedEnginePool()
		}
		code, err = pool.probe(ctx, t, path)
	}
	if err != nil {
		return err
	}
	if code/100 != 2 {
		return statusError(code)
	}
	return nil
}

// probeClient is the probe through a net/http client.
func probeClient(ctx context.Context, c *http.Client, t Target, path string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL+path, nil)
	if err != nil {
		return 0, &ProbeError{Reason: "bad url"}
	}
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
	req.Header.Set("X-Mesh-Gateway", t.GatewayID)
	return send(ctx, c, req)
}

// newTransport is the net/http transport of the external-provider prober.
func newTransport(proxy func(*http.Request) (*url.URL, error)) *http.Transport {
	return &http.Transport{
		Proxy:                  proxy,
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:      proxy != nil,
		MaxIdleConns:           4096,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    5 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true,
		ReadBufferSize:         2 << 10,
		WriteBufferSize:        2 << 10,
	}
}

// noRedirect judges the redirect answer itself: a probe does not follow it.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// maxDrain bounds how much of a body is read so that its connection can be reused.
const maxDrain = 64 << 10

// send does req and returns the status code, with the body drained and closed.
func send(ctx context.Context, c *http.Client, req *http.Request) (int, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, transportError(ctx, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	resp.Body.Close()
	return resp.StatusCode, nil
}

func statusError(code int) *ProbeError {
	return &ProbeError{StatusCode: code, Reason: "status " + strconv.Itoa(code)}
}

// transportError explains a request that got no answer, without the request's headers (so
// without the API key).
func transportError(ctx context.Context, err error) *ProbeError {
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), context.Canceled) {
			return &ProbeError{Reason: "canceled", Err: context.Canceled}
		}
		return &ProbeError{Reason: "timeout", Err: ErrTimeout}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &ProbeError{Reason: "timeout", Err: ErrTimeout}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &ProbeError{Reason: "connection error: " + err.Error()}
}
