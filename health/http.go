package health

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// HTTPProber probes an engine with GET url + endpoint (--health-check-endpoint), the worker's
// API key as a bearer token and this gateway's node id as X-Mesh-Gateway. 2xx within the timeout
// is healthy. The zero value is ready to use.
type HTTPProber struct {
	// Client sends the probes. Default: a client shared by all engine probes, on a bounded
	// keep-alive Transport.
	Client *http.Client
}

// Probe implements Prober.
func (p *HTTPProber) Probe(ctx context.Context, t Target) error {
	path := t.Endpoint
	if path == "" {
		path = "/health"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL+path, nil)
	if err != nil {
		return &ProbeError{Reason: "bad url"}
	}
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
	req.Header.Set("X-Mesh-Gateway", t.GatewayID)
	code, err := send(ctx, p.client(), req)
	if err != nil {
		return err
	}
	if code/100 != 2 {
		return statusError(code)
	}
	return nil
}

func (p *HTTPProber) client() *http.Client {
	if p.Client != nil {
		return p.Client
	}
	return engineClient()
}

// engineClient is shared by every HTTP probe of an engine. Engines sit on the gateway's network,
// so no proxy is used. Idle connections are kept for the next probe (IdleConnTimeout exceeds the
// default 60 s interval) but bounded in number, since each costs two goroutines and buffers.
// Connections per host are not limited here: the Checker bounds the probes in flight.
var engineClient = sync.OnceValue(func() *http.Client {
	return &http.Client{Transport: newTransport(nil), CheckRedirect: noRedirect}
})

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
