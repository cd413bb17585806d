package gateway

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/testkit"
)

// reqLogEnv is a gateway whose log goes to a JSON buffer, the request log's records formatted
// by the gateway (RequestLogWriter) into the same buffer.
func reqLogEnv(t *testing.T, cfg Config, level slog.Level) (*testEnv, *logbuf.Buffer) {
	t.Helper()
	var buf logbuf.Buffer
	cfg.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
	cfg.RequestLogWriter, cfg.RequestLogJSON = &buf, true
	return newEnv(t, cfg), &buf
}

// records returns the request log's records, decoded.
func records(t *testing.T, buf *logbuf.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range buf.Lines() {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON record: %q", line)
		}
		if m := r["msg"]; m == msgRouteCompleted || m == msgRouteRejected {
			out = append(out, r)
		}
	}
	return out
}

// lastRecord waits for the n-th record of the request log and returns it.
func lastRecord(t *testing.T, buf *logbuf.Buffer, n int) map[string]any {
	t.Helper()
	testkit.For(t, "request log record", func() bool { return len(records(t, buf)) >= n })
	recs := records(t, buf)
	if len(recs) != n {
		t.Fatalf("%d records, want %d: %v", len(recs), n, recs)
	}
	return recs[n-1]
}

// TestRequestLogRecords: one route_completed or route_rejected record per model request, with
// the request id the client got, the worker, path, stream, capabilities, status, duration and
// outcome.
func TestRequestLogRecords(t *testing.T) {
	e, buf := reqLogEnv(t, Config{RequestLog: true, MaxPayload: 1000, Retry: RetryConfig{Disabled: true}}, slog.LevelInfo)
	var status atomic.Int32
	status.Store(200)
	var cut atomic.Bool
	var hits atomic.Int32
	cutting := sseUpstream(5, 2, nil, &hits)
	srv, w := e.upstream(func(rw http.ResponseWriter, r *http.Request) {
		if cut.Load() {
			cutting(rw, r)
			return
		}
		if st := int(status.Load()); st != 200 {
			rw.WriteHeader(st)
		}
		okHandler("a")(rw, r)
	})
	n := 0
	check := func(name string, got map[string]any, want map[string]any) {
		t.Helper()
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %v (%T), want %v; record %v", name, k, got[k], got[k], v, got)
			}
		}
		if d, ok := got["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("%s: duration_ms %v", name, got["duration_ms"])
		}
	}

	code, hdr, _ := e.post("/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hi"}]}`)
	n++
	r := lastRecord(t, buf, n)
	if code != 200 || hdr.Get("X-Request-Id") == "" || hdr.Get("X-Request-Id") != hdr.Get("X-Mesh-Request-Id") {
		t.Fatalf("answer %d, X-Request-Id %q, X-Mesh-Request-Id %q", code, hdr.Get("X-Request-Id"), hdr.Get("X-Mesh-Request-Id"))
	}
	check("success", r, map[string]any{"msg": msgRouteCompleted, "level": "INFO", "request_id": hdr.Get("X-Request-Id"),
		"worker": srv.URL, "path": "/v1/chat/completions", "model": "m1", "stream": false, "capabilities": "chat",
		"status": 200.0, "attempts": 1.0, "outcome": outcomeSuccess})

	_, hdr, _ = e.post("/v1/completions", `{"prompt":"x"}`, "X-Request-Id", "client-id-7")
	n++
	check("the client's id", lastRecord(t, buf, n), map[string]any{"request_id": "client-id-7", "path": "/v1/completions"})
	if hdr.Get("X-Request-Id") != "client-id-7" {
		t.Errorf("X-Request-Id %q, want the client's", hdr.Get("X-Request-Id"))
	}

	status.Store(404)
	e.post("/v1/chat/completions", `{}`)
	n++
	check("client error", lastRecord(t, buf, n), map[string]any{"status": 404.0, "outcome": outcomeClientError})

	status.Store(500)
	e.post("/v1/chat/completions", `{}`)
	n++
	check("upstream error", lastRecord(t, buf, n), map[string]any{"status": 500.0, "outcome": outcomeUpstreamError, "worker": srv.URL})

	status.Store(200)
	cut.Store(true)
	e.post("/v1/chat/completions", `{"stream":true}`)
	n++
	check("stream cut", lastRecord(t, buf, n), map[string]any{"status": 200.0, "stream": true, "capabilities": "chat,streaming",
		"outcome": outcomeStreamInterrupted})
	cut.Store(false)

	code, hdr, _ = e.post("/v1/chat/completions", `{"model":7}`)
	n++
	check("bad body", lastRecord(t, buf, n), map[string]any{"msg": msgRouteRejected, "status": 400.0, "outcome": outcomeInvalidRequest,
		"request_id": hdr.Get("X-Request-Id")})
	if code != 400 || hdr.Get("X-Request-Id") == "" {
		t.Errorf("bad body: %d, X-Request-Id %q", code, hdr.Get("X-Request-Id"))
	}

	code, hdr, _ = e.post("/v1/chat/completions", `{"prompt":"`+strings.Repeat("y", 2000)+`"}`)
	n++
	check("too large", lastRecord(t, buf, n), map[string]any{"msg": msgRouteRejected, "status": 413.0, "outcome": outcomeTooLarge,
		"request_id": hdr.Get("X-Request-Id")})
	if code != 413 || hdr.Get("X-Request-Id") == "" {
		t.Errorf("too large: %d, X-Request-Id %q", code, hdr.Get("X-Request-Id"))
	}

	if _, err := e.gw.Pool().SetFlags(w.ID, true, false); err != nil {
		t.Fatal(err)
	}
	code, hdr, _ = e.post("/v1/embeddings", `{"input":"x"}`)
	n++
	r = lastRecord(t, buf, n)
	check("no worker", r, map[string]any{"msg": msgRouteRejected, "status": 503.0, "outcome": outcomeNoAvailableWorkers,
		"path": "/v1/embeddings", "capabilities": "embeddings", "request_id": hdr.Get("X-Request-Id")})
	if _, ok := r["worker"]; ok || code != 503 {
		t.Errorf("no worker: %d, record %v", code, r)
	}
}

// TestRequestLogOverloaded: a request shed by the admission limit is logged, with the id the
// client got.
func TestRequestLogOverloaded(t *testing.T) {
	e, buf := reqLogEnv(t, Config{RequestLog: true, MaxInflight: 1}, slog.LevelInfo)
	held, release := make(chan struct{}, 1), make(chan struct{})
	e.upstream(holdUpstream(held, release))
	first := make(chan int, 1)
	go func() {
		status, _, _ := e.post("/v1/completions", `{}`)
		first <- status
	}()
	<-held
	code, hdr, _ := e.post("/v1/completions", `{}`, "X-Request-Id", "shed-1")
	r := lastRecord(t, buf, 1)
	if code != 503 || hdr.Get("X-Request-Id") != "shed-1" || hdr.Get("X-Mesh-Request-Id") != "shed-1" ||
		r["msg"] != msgRouteRejected || r["outcome"] != outcomeOverloaded || r["request_id"] != "shed-1" || r["status"] != 503.0 {
		t.Errorf("answer %d %v, record %v", code, hdr, r)
	}
	close(release)
	if s := <-first; s != 200 {
		t.Errorf("held request: %d", s)
	}
	lastRecord(t, buf, 2)
}

// TestRequestLogBodyBudget: a request refused because the body budget stayed full is logged as
// overloaded, not as "no available workers", which its 503 alone would say.
func TestRequestLogBodyBudget(t *testing.T) {
	e, buf := reqLogEnv(t, Config{RequestLog: true, MaxBufferedBody: 1000, BodyBudgetWait: time.Millisecond}, slog.LevelInfo)
	held, release := make(chan struct{}, 1), make(chan struct{})
	e.upstream(holdUpstream(held, release))
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	first := make(chan int, 1)
	go func() {
		status, _, _ := e.post("/v1/completions", `{"prompt":"`+strings.Repeat("a", 787)+`"}`)
		first <- status
	}()
	<-held
	code, _, _ := e.post("/v1/completions", `{"prompt":"`+strings.Repeat("b", 487)+`"}`, "X-Request-Id", "budget-1")
	r := lastRecord(t, buf, 1)
	if code != 503 || r["msg"] != msgRouteRejected || r["outcome"] != outcomeOverloaded || r["request_id"] != "budget-1" {
		t.Errorf("answer %d, record %v", code, r)
	}
	releaseOnce()
	<-first
}

// TestRequestLogOff: nothing is logged with RequestLog off, or with the logger above INFO.
func TestRequestLogOff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		on    bool
		level slog.Level
	}{{"off", false, slog.LevelDebug}, {"on, logger at WARN", true, slog.LevelWarn}} {
		t.Run(tc.name, func(t *testing.T) {
			e, buf := reqLogEnv(t, Config{RequestLog: tc.on}, tc.level)
			e.upstream(okHandler("a"))
			if code, _, _ := e.post("/v1/chat/completions", `{}`); code != 200 {
				t.Fatalf("status %d", code)
			}
			e.post("/v1/chat/completions", `{"model":7}`)
			e.gw.Close()
			if got := records(t, buf); len(got) != 0 {
				t.Errorf("logged %v", got)
			}
		})
	}
}

// TestRequestLogger: without RequestLogWriter, the request log's records go through
// RequestLogger's handler when it is set, and the gateway's other lines to Logger.
func TestRequestLogger(t *testing.T) {
	var buf, reqBuf logbuf.Buffer
	e := newEnv(t, Config{RequestLog: true, Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
		RequestLogger: slog.New(slog.NewJSONHandler(&reqBuf, nil))})
	e.upstream(okHandler("a"))
	_, hdr, _ := e.post("/v1/chat/completions", `{}`)
	r := lastRecord(t, &reqBuf, 1)
	if r["msg"] != msgRouteCompleted || r["request_id"] != hdr.Get("X-Request-Id") {
		t.Errorf("record %v", r)
	}
	if got := records(t, &buf); len(got) != 0 {
		t.Errorf("the process log has the request log's records: %v", got)
	}
}
