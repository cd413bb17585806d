package gateway

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/worker"
)

// BenchmarkProxyStream measures the gateway's in-process cost per streamed chat request of 20
// SSE events, each flushed on its own by the upstream as an engine flushes each token. Compare
// with BenchmarkDirectStream.
func BenchmarkProxyStream(b *testing.B) {
	benchStream(b, startBenchGateway(b, startFastUpstream(b)))
}

func BenchmarkDirectStream(b *testing.B) { benchStream(b, startFastUpstream(b)) }

// BenchmarkProxyChat measures the gateway's in-process cost per non-streamed chat request:
// a fasthttp client → the gateway → a fasthttp upstream, all on loopback. Compare with
// BenchmarkDirectChat (client → upstream) for the added cost.
func BenchmarkProxyChat(b *testing.B) { benchChat(b, startBenchGateway(b, startFastUpstream(b))) }

// startBenchGateway serves a gateway with one worker at up on loopback and returns its address.
func startBenchGateway(b *testing.B, up string) string {
	gw, err := New(Config{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := gw.Pool().Upsert(worker.Spec{URL: "http://" + up}, pool.OriginLocal); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	serveBench(b, gw, ln)
	return ln.Addr().String()
}

// serveBench serves gw on ln until the benchmark ends, then shuts it down at once.
func serveBench(b *testing.B, gw *Gateway, ln net.Listener) {
	go func() { _ = gw.Serve(ln) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		gw.cfg.ShutdownSettle = 0
		_ = gw.Shutdown(ctx)
	})
}

func BenchmarkDirectChat(b *testing.B) { benchChat(b, startFastUpstream(b)) }

// BenchmarkHeaderPath is the gateway's header work on one proxied request: the pass over the
// request headers, stripping and stamping them, aiming at a worker, and finalizing the answer's
// headers. Typical client and engine headers, none of them hop-by-hop.
func BenchmarkHeaderPath(b *testing.B) {
	gw, err := New(Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	w, _, err := gw.Pool().Upsert(worker.Spec{URL: "http://127.0.0.1:1"}, pool.OriginLocal)
	if err != nil {
		b.Fatal(err)
	}
	var req fasthttp.RequestHeader
	if err := req.Read(bufio.NewReader(strings.NewReader("POST /v1/chat/completions HTTP/1.1\r\nHost: gw:8080\r\n" +
		"Content-Type: application/json\r\nContent-Length: 120\r\nAuthorization: Bearer sk-client\r\n" +
		"User-Agent: OpenAI/Python 1.50\r\nAccept: application/json\r\nX-Stainless-Lang: python\r\n\r\n"))); err != nil {
		b.Fatal(err)
	}
	var resp fasthttp.ResponseHeader
	if err := resp.Read(bufio.NewReader(strings.NewReader("HTTP/1.1 200 OK\r\nDate: Mon, 01 Dec 2026 03:00:00 GMT\r\n" +
		"Server: uvicorn\r\nContent-Type: application/json\r\nContent-Length: 280\r\n\r\n"))); err != nil {
		b.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	c := &call{g: gw, ctx: &ctx}
	up := upstreamOf(w)
	b.ReportAllocs()
	for b.Loop() {
		h := &ctx.Request.Header
		req.CopyTo(h)
		resp.CopyTo(&ctx.Response.Header)
		c.hdr.scan(h)
		c.key = append(c.key[:0], c.hdr.routingKey...)
		c.prepareHeaders(h)
		c.aim(up)
		c.commit(w, 1, 200)
	}
}

const (
	benchBody       = `{"model":"m","messages":[{"role":"user","content":"Hello there, how are you today?"}],"max_tokens":16}`
	benchStreamBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"Hello there, how are you today?"}],"max_tokens":16}`
	benchEvents     = 20
)

var (
	benchEvent = []byte(`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok "}}]}` + "\n\n")
	// benchDone ends the stream as an engine does for stream_options.include_usage: a chunk of
	// usage with the prompt's cached tokens, then [DONE].
	benchDone = []byte(`data: {"id":"x","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":20,` +
		`"total_tokens":32,"prompt_tokens_details":{"cached_tokens":8}}}` + "\n\ndata: [DONE]\n\n")
)

func benchStream(b *testing.B, addr string) {
	hc := &fasthttp.HostClient{Addr: addr, MaxConns: 64}
	want := len(benchEvent)*benchEvents + len(benchDone)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		for pb.Next() {
			req.Reset()
			req.SetRequestURI("http://" + addr + "/v1/chat/completions")
			req.Header.SetMethod("POST")
			req.Header.SetContentType("application/json")
			req.SetBodyString(benchStreamBody)
			err := hc.Do(req, resp)
			if body := resp.Body(); err != nil || resp.StatusCode() != 200 || len(body) != want || !bytes.HasSuffix(body, benchDone) {
				b.Errorf("status %d err %v, body of %d bytes, want %d", resp.StatusCode(), err, len(body), want)
				return
			}
		}
	})
}

func benchChat(b *testing.B, addr string) {
	hc := &fasthttp.HostClient{Addr: addr, MaxConns: 64}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		for pb.Next() {
			req.Reset()
			req.SetRequestURI("http://" + addr + "/v1/chat/completions")
			req.Header.SetMethod("POST")
			req.Header.SetContentType("application/json")
			req.SetBodyString(benchBody)
			if err := hc.Do(req, resp); err != nil || resp.StatusCode() != 200 {
				b.Errorf("status %d err %v", resp.StatusCode(), err)
				return
			}
		}
	})
}

func startFastUpstream(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if !bytes.Contains(ctx.PostBody(), []byte(`"stream":true`)) {
			ctx.SetContentType("application/json")
			ctx.SetBody(benchAnswer)
			return
		}
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			for range benchEvents {
				_, _ = w.Write(benchEvent)
				if w.Flush() != nil {
					return
				}
			}
			_, _ = w.Write(benchDone)
			_ = w.Flush()
		})
	}}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}
