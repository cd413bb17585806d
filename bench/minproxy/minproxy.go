// Package minproxy is the benchmark's reference floor for a fasthttp data plane: a
// fasthttp.Server with one HostClient per upstream, round robin, no routing logic, and SSE
// relayed read by read. meshgw's distance from it is the cost of meshgw's own code; its distance
// from HAProxy is the cost of Go and fasthttp. bench/cmd/minproxy serves it, and the gateway's
// BenchmarkHandlerCost runs its handler beside meshgw's.
package minproxy

import (
	"bufio"
	"bytes"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// NewHostClient is minproxy's connection pool to one upstream at addr (host:port).
func NewHostClient(addr string) *fasthttp.HostClient {
	return &fasthttp.HostClient{Addr: addr, MaxConns: 2048, MaxIdleConnDuration: 4 * time.Second,
		ReadBufferSize: 16 << 10, WriteBufferSize: 16 << 10, NoDefaultUserAgentHeader: true, DisablePathNormalizing: true}
}

// NewServer is minproxy's server around handler h.
func NewServer(h fasthttp.RequestHandler) *fasthttp.Server {
	return &fasthttp.Server{Handler: h, NoDefaultServerHeader: true, NoDefaultContentType: true,
		ReadBufferSize: 16 << 10, WriteBufferSize: 16 << 10, IdleTimeout: 90 * time.Second}
}

// Proxy relays each request to its upstreams in turn.
type Proxy struct {
	hcs []*fasthttp.HostClient
	rr  atomic.Uint64
}

// New returns a proxy over the upstreams' pools; it needs at least one.
func New(hcs []*fasthttp.HostClient) *Proxy { return &Proxy{hcs: hcs} }

var (
	streamTrue = []byte(`"stream":true`)
	bufPool    = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}
)

// Handle relays one request: a plain answer whole, a stream ("stream":true in the body) read by
// read from the connection goroutine.
func (p *Proxy) Handle(ctx *fasthttp.RequestCtx) {
	hc := p.hcs[p.rr.Add(1)%uint64(len(p.hcs))]
	ctx.Request.SetHost(hc.Addr)
	if !bytes.Contains(ctx.PostBody(), streamTrue) {
		if err := hc.Do(&ctx.Request, &ctx.Response); err != nil {
			ctx.Error("upstream request failed", fasthttp.StatusBadGateway)
		}
		return
	}
	resp := fasthttp.AcquireResponse()
	resp.StreamBody = true
	if err := hc.Do(&ctx.Request, resp); err != nil {
		fasthttp.ReleaseResponse(resp)
		ctx.Error("upstream request failed", fasthttp.StatusBadGateway)
		return
	}
	resp.Header.CopyTo(&ctx.Response.Header)
	ctx.Response.ImmediateHeaderFlush = true
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer fasthttp.ReleaseResponse(resp)
		defer resp.CloseBodyStream()
		bp := bufPool.Get().(*[]byte)
		defer bufPool.Put(bp)
		body := resp.BodyStream()
		for {
			n, err := body.Read(*bp)
			if n > 0 {
				if _, werr := w.Write((*bp)[:n]); werr != nil {
					return
				}
				if werr := w.Flush(); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
}
