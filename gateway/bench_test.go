package gateway

import (
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

// BenchmarkProxyChat measures the gateway's in-process cost per non-streamed chat request:
// a fasthttp client → the gateway → a fasthttp upstream, all on loopback. Compare with
// BenchmarkDirectChat (client → upstream) for the added cost.
func BenchmarkProxyChat(b *testing.B) {
	up := startFastUpstream(b)
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
	go func() { _ = gw.Serve(ln) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		gw.cfg.ShutdownSettle = 0
		_ = gw.Shutdown(ctx)
	})
	benchChat(b, ln.Addr().String())
}

func BenchmarkDirectChat(b *testing.B) { benchChat(b, startFastUpstream(b)) }

const benchBody = `{"model":"m","messages":[{"role":"user","content":"Hello there, how are you today?"}],"max_tokens":16}`

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
	answer := []byte(`{"id":"x","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"` + strings.Repeat("ok ", 10) + `"}}]}`)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBody(answer)
	}}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}
