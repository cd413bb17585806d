package gateway

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/meshgw/meshgw/bench/minproxy"
	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/logbatch"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/worker"
)

// BenchmarkHandlerCost is what one plain chat request costs meshgw's own code, without the
// kernel: the client, the gateway and a fast upstream run in this process and talk over
// in-memory pipes (fasthttputil), one request at a time. The gateway runs as make bench's plain
// rows run meshgw: round robin, the request log at its default, off ("cache_aware": the default
// policy, on this short prompt; "request-log": the log on, batched), each outcome recorded by a
// circuit breaker with its Prometheus hooks, as the worker's owner records it in the daemon. "minimal" is the same path
// through minproxy's handler (bench/minproxy, what make bench runs as minproxy): a
// fasthttp.Server and a HostClient, nothing else.
// The difference of their cpu-ns/op (the process's CPU per request, client and upstream
// included in both) is what meshgw adds to a bare fasthttp proxy, the gap make bench's plain
// rows measure through the kernel and its noise.
func BenchmarkHandlerCost(b *testing.B) {
	for _, row := range []struct {
		name, policy string
		log          bool
	}{{"round_robin", "round_robin", false}, {"cache_aware", "cache_aware", false}, {"round_robin/request-log", "round_robin", true}} {
		b.Run("meshgw/"+row.name, func(b *testing.B) {
			benchHandler(b, func(b *testing.B, ln net.Listener, dial fasthttp.DialFunc) {
				serveBenchGateway(b, row.policy, row.log, ln, dial)
			})
		})
	}
	b.Run("minimal", func(b *testing.B) { benchHandler(b, serveMinimalProxy) })
}

// serveBenchGateway serves a gateway with policy on ln whose one worker is dialed with dial;
// log turns the request log on, batched as the daemon writes it.
func serveBenchGateway(b *testing.B, policy string, log bool, ln net.Listener, dial fasthttp.DialFunc) {
	out := logbatch.New(io.Discard, logbatch.Options{})
	b.Cleanup(func() { _ = out.Close() }) // registered first, so run after the gateway's shutdown
	reg := prometheus.NewRegistry()
	bm, err := breaker.NewMetrics(reg, nil)
	if err != nil {
		b.Fatal(err)
	}
	br := breaker.New(breaker.DefaultConfig(), breaker.Options{Hooks: bm.Hooks("http://upstream")})
	var cls breaker.Classifier
	gw, err := New(Config{Logger: slog.New(slog.DiscardHandler), Registerer: reg, Policy: policy,
		RequestLog: log, RequestLogger: slog.New(slog.NewTextHandler(io.Discard, nil)), RequestLogWriter: out.Batched(),
		OnOutcome: func(_ *pool.Worker, status int, connErr bool) { br.Record(cls.ClassifyAttempt(status, connErr)) }})
	if err != nil {
		b.Fatal(err)
	}
	w, _, err := gw.Pool().Upsert(worker.Spec{URL: "http://upstream"}, pool.OriginLocal)
	if err != nil {
		b.Fatal(err)
	}
	up := upstreamOf(w)
	up.ready()
	up.hc.Dial = upstreamDial(dial, deadlineSlack(gw.cfg.RequestTimeout), true)
	serveBench(b, gw, ln)
}

// serveMinimalProxy serves minproxy's handler on ln, its one upstream dialed with dial.
func serveMinimalProxy(b *testing.B, ln net.Listener, dial fasthttp.DialFunc) {
	hc := minproxy.NewHostClient("upstream")
	hc.Dial = dial
	srv := minproxy.NewServer(minproxy.New([]*fasthttp.HostClient{hc}).Handle)
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
}

// benchAnswer is a plain chat answer with the usage an engine reports.
var benchAnswer = []byte(`{"id":"x","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"` +
	"ok ok ok ok ok ok ok ok ok ok " + `"}}],` +
	`"usage":{"prompt_tokens":12,"completion_tokens":10,"total_tokens":22,"prompt_tokens_details":{"cached_tokens":8}}}`)

func benchHandler(b *testing.B, serve func(*testing.B, net.Listener, fasthttp.DialFunc)) {
	upLn, proxyLn := fasthttputil.NewInmemoryListener(), fasthttputil.NewInmemoryListener()
	upstream := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBody(benchAnswer)
	}}
	go func() { _ = upstream.Serve(upLn) }()
	b.Cleanup(func() { _ = upstream.Shutdown() })
	serve(b, proxyLn, func(string) (net.Conn, error) { return upLn.Dial() })

	client := &fasthttp.HostClient{Addr: "gateway", Dial: func(string) (net.Conn, error) { return proxyLn.Dial() }}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	do := func() {
		req.Reset()
		req.SetRequestURI("http://gateway/v1/chat/completions")
		req.Header.SetMethod(fasthttp.MethodPost)
		req.Header.SetContentType("application/json")
		req.SetBodyString(benchBody)
		if err := client.Do(req, resp); err != nil || resp.StatusCode() != 200 || !bytes.Equal(resp.Body(), benchAnswer) {
			b.Fatalf("status %d err %v body %q", resp.StatusCode(), err, resp.Body())
		}
	}
	do() // connections made before the clock starts
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		do()
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}
