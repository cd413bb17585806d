package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/bench/engine"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp's housekeeping goroutines outlive a stopped server by design (they sleep out
		// their period); the harness's own goroutines are still checked.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	)
}

// serveHandler runs h on a loopback port until the test ends and returns the chat URL.
func serveHandler(t *testing.T, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.ShutdownWithContext(ctx)
		<-done
	})
	return "http://" + ln.Addr().String() + chatPath
}

// cutAfter streams n events and ends the answer without [DONE].
func cutAfter(n int) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			for range n {
				w.WriteString("data: {}\n\n")
				w.Flush()
			}
		})
	}
}

func TestRunStreams(t *testing.T) {
	tests := []struct {
		name      string
		handler   fasthttp.RequestHandler
		header    http.Header
		events    int
		wantOK    bool   // streams complete, none cut or wrong
		wantCut   bool   // every stream cut
		wantWrong bool   // every stream has the wrong count
		wantErr   string // in FirstError
	}{
		{name: "engine streams", handler: engine.Handler(engine.Config{Events: 5}), events: 5, wantOK: true},
		{name: "count from header", handler: engine.Handler(engine.Config{Events: 5}), events: 2,
			header: http.Header{engine.HeaderEvents: {"2"}}, wantOK: true},
		{name: "fewer events than expected", handler: engine.Handler(engine.Config{Events: 3}), events: 5, wantWrong: true},
		{name: "no [DONE]", handler: cutAfter(2), events: 2, wantCut: true, wantErr: "after 2 events without [DONE]"},
		{name: "error status", handler: func(ctx *fasthttp.RequestCtx) { ctx.Error("boom", 502) }, events: 2,
			wantCut: true, wantErr: "status 502"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := serveHandler(t, tt.handler)
			r := RunStreams(context.Background(), StreamOptions{URL: url, Streams: 4, MaxStreams: 40, Duration: 5 * time.Second,
				Events: tt.events, Header: tt.header})
			all := r.Completed + r.Cut
			if all != 40 {
				t.Fatalf("ran %d streams, want MaxStreams 40: %+v", all, r)
			}
			switch {
			case tt.wantOK && (r.Completed != 40 || r.WrongEvents != 0 || r.TTFBP50Ms <= 0 || r.StreamsPerSec <= 0):
				t.Errorf("want 40 good streams with a TTFB: %+v", r)
			case tt.wantWrong && r.WrongEvents != 40:
				t.Errorf("want 40 streams with the wrong count: %+v", r)
			case tt.wantCut && (r.Cut != 40 || !strings.Contains(r.FirstError, tt.wantErr)):
				t.Errorf("want 40 cut streams with error %q: %+v", tt.wantErr, r)
			}
		})
	}
}

func TestRunStreamsRecordsGaps(t *testing.T) {
	url := serveHandler(t, engine.Handler(engine.Config{Events: 3, EventDelay: 20 * time.Millisecond}))
	r := RunStreams(context.Background(), StreamOptions{URL: url, Streams: 2, MaxStreams: 2, Duration: 5 * time.Second,
		Events: 3, RecordGaps: true})
	if r.Completed != 2 || r.GapMinMs == nil || r.GapP50Ms == nil || r.GapMaxMs == nil {
		t.Fatalf("want 2 streams with gaps: %+v", r)
	}
	// Each stream has 2 gaps whose sum is at least the 40 ms the engine paused, less what the
	// first event's own delay took off: the largest gap is at least half the pause.
	if *r.GapMaxMs < 10 || *r.GapMinMs > *r.GapP50Ms || *r.GapP50Ms > *r.GapMaxMs {
		t.Errorf("gaps min %.1f p50 %.1f max %.1f ms; want ordered and max ≥ 10 ms", *r.GapMinMs, *r.GapP50Ms, *r.GapMaxMs)
	}
}

func TestRunStreamsStopsAtDeadline(t *testing.T) {
	url := serveHandler(t, engine.Handler(engine.Config{Events: 2}))
	start := time.Now()
	r := RunStreams(context.Background(), StreamOptions{URL: url, Streams: 2, Duration: 300 * time.Millisecond, Events: 2})
	if el := time.Since(start); el > 10*time.Second || r.Completed == 0 || r.Cut != 0 {
		t.Errorf("after %v: %+v; want streams, none cut, and a prompt stop", el, r)
	}
}

// TestReportShape runs the streaming client for a second against an in-process engine, builds
// a report around it as Run does, and checks the JSON keys of DESIGN.md section 15.
func TestReportShape(t *testing.T) {
	url := serveHandler(t, engine.Handler(engine.Config{Events: 20}))
	res := RunStreams(context.Background(), StreamOptions{URL: url, Streams: 8, Duration: time.Second, Events: 20, MaxStreams: 100_000})
	if res.Completed == 0 || res.Cut != 0 {
		t.Fatalf("stream load: %+v", res)
	}
	cpu := 20.0
	rep := &Report{Machine: "test", Proxy: map[string]*ProxyTarget{}, Health: notMeasured("test"),
		Mesh: notMeasured("test"), Raft: notMeasured("test")}
	for _, name := range targetNames {
		round := ProxyRound{WrkResult: WrkResult{RPS: 1000, P50Ms: 1, P99Ms: 2, Checked: 10}}
		sr := StreamRound{StreamResult: res}
		if name != "direct" {
			round.CPUUsPerReq, sr.CPUUsPerStream = &cpu, &cpu
		}
		rep.Proxy[name] = summarizeProxy([]ProxyRound{round})
		rep.Proxy[name].OneConn = summarizeOneConn([]WrkResult{{RPS: 5000, P50Ms: 0.2, P99Ms: 0.4, Checked: 10}})
		if rep.Stream == nil {
			rep.Stream = &StreamSection{Paced: map[string]*StreamResult{}, PacedDelayMs: 100}
		}
		rep.Stream.setTarget(name, summarizeStream([]StreamRound{sr}))
	}
	rep.Goals = computeGoals(rep)
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"machine", "proxy.direct.rps", "proxy.direct.p50_ms", "proxy.direct.p99_ms",
		"proxy.haproxy.rps", "proxy.meshgw.cpu_us_per_req", "proxy.meshgw.one_connection.p50_ms", "stream.meshgw.streams_per_s", "stream.direct.ttfb_p50_ms",
		"stream.haproxy.cut", "health.status", "mesh.status", "raft.status", "goals"} {
		if lookup(m, path) == nil {
			t.Errorf("report lacks %s", path)
		}
	}
	if v := lookup(m, "proxy.direct.cpu_us_per_req"); v != nil {
		t.Errorf("direct has a proxy CPU figure %v; it has no proxy", v)
	}
	if got := lookup(m, "health.status"); got != "not yet measured" {
		t.Errorf("health.status = %v", got)
	}
	var table strings.Builder
	rep.PrintTable(&table)
	for _, want := range []string{"meshgw req/s ÷ HAProxy", "1.00 (1000 ÷ 1000)", "≥ 0.80", "met", "health: not yet measured",
		"meshgw added latency p50, 1 connection", "one connection (wrk -t1 -c1"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// lookup follows a dotted path through decoded JSON; nil when absent or null.
func lookup(m map[string]any, path string) any {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[k]
	}
	return v
}
