package gateway

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshgw/meshgw/worker"
)

func TestProxyForwardsBytesAndStampsHeaders(t *testing.T) {
	e := newEnv(t, Config{NodeID: "gw-a"})
	type seen struct {
		body, gateway, host, auth, reqID, hop string
		hints                                 []string
	}
	got := make(chan seen, 1)
	srv, w := e.upstream(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{string(b), r.Header.Get("X-Mesh-Gateway"), r.Host, r.Header.Get("Authorization"), r.Header.Get("X-Request-Id"), r.Header.Get("X-Hop"),
			[]string{r.Header.Get("X-Mesh-Route-Model"), r.Header.Get("X-Mesh-Route-Stream"), r.Header.Get("X-Mesh-Route-Capabilities")}}
		rw.Header().Set("Content-Type", "application/json")
		rw.Header().Set("Connection", "close")
		_, _ = io.WriteString(rw, `{"ok":true}`)
	}, func(s *worker.Spec) { s.APIKey = "sk-worker-secret" })
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	status, hdr, answer := e.post("/v1/chat/completions", body,
		"X-Mesh-Route-Model", "m", "X-Mesh-Route-Stream", "false", "X-Mesh-Route-Capabilities", "chat", "Authorization", "Bearer client-key",
		"Connection", "X-Hop", "X-Hop", "connection-scoped")
	if status != 200 || answer != `{"ok":true}` {
		t.Fatalf("got %d %q", status, answer)
	}
	s := <-got
	if s.body != body {
		t.Errorf("upstream got body %q, want the original bytes", s.body)
	}
	if s.gateway != "gw-a" {
		t.Errorf("upstream X-Mesh-Gateway = %q", s.gateway)
	}
	if s.host != strings.TrimPrefix(srv.URL, "http://") {
		t.Errorf("upstream Host = %q, want the worker's", s.host)
	}
	if s.auth != "Bearer sk-worker-secret" {
		t.Errorf("upstream Authorization = %q, want the worker's key", s.auth)
	}
	if s.hop != "" {
		t.Errorf("a header named by Connection was forwarded: X-Hop=%q", s.hop)
	}
	if s.hints[0]+s.hints[1]+s.hints[2] != "" {
		t.Errorf("hint headers were forwarded: %q", s.hints)
	}
	want := map[string]string{"X-Mesh-Worker": string(w.ID), "X-Mesh-Route-Attempt": "1", "X-Mesh-Gateway": "gw-a", "X-Mesh-Owner": "gw-a", "X-Mesh-Request-Id": s.reqID}
	for k, v := range want {
		if hdr.Get(k) != v || v == "" {
			t.Errorf("answer header %s = %q, want %q", k, hdr.Get(k), v)
		}
	}
	if hdr.Get("Connection") == "close" {
		t.Error("the upstream's Connection: close leaked to the client")
	}
	// A client-supplied request id is kept.
	_, hdr, _ = e.post("/v1/chat/completions", body, "X-Request-Id", "client-id-7")
	<-got
	if hdr.Get("X-Mesh-Request-Id") != "client-id-7" {
		t.Errorf("X-Mesh-Request-Id = %q, want the client's x-request-id", hdr.Get("X-Mesh-Request-Id"))
	}
	if n := counterValue(t, e, "meshgw_http_requests_total", map[string]string{"route": "/v1/chat/completions", "status": "200"}); n != 2 {
		t.Errorf("meshgw_http_requests_total{route=chat,status=200} = %v, want 2", n)
	}
}

// counterValue reads one counter child from the env's registry.
func counterValue(t *testing.T, e *testEnv, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

func TestRetryLandsOnAnotherWorkerWhenOneRefuses(t *testing.T) {
	e := newEnv(t, Config{Policy: "round_robin"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	dead := e.add(worker.Spec{URL: closed})
	var served atomic.Int32
	_, good := e.upstream(func(rw http.ResponseWriter, r *http.Request) { served.Add(1); okHandler("good")(rw, r) })
	attempts := map[string]int{}
	for i := 0; i < 10; i++ {
		status, hdr, body := e.post("/v1/completions", `{"prompt":"x"}`)
		if status != 200 || !strings.Contains(body, "good") || hdr.Get("X-Mesh-Worker") != string(good.ID) {
			t.Fatalf("request %d: %d %q worker %s", i, status, body, hdr.Get("X-Mesh-Worker"))
		}
		attempts[hdr.Get("X-Mesh-Route-Attempt")]++
	}
	if attempts["2"] == 0 || attempts["1"] == 0 || served.Load() != 10 {
		t.Errorf("attempt headers %v, served %d: want some first-try and some second-try answers", attempts, served.Load())
	}
	// Outcomes: one per worker touched per request; the dead one as a connection error.
	deadReports := 0
	for _, o := range e.outcomesCopy() {
		if o.worker == dead.ID {
			deadReports++
			if !o.connErr {
				t.Errorf("dead worker reported %+v, want connErr", o)
			}
		}
	}
	if deadReports != attempts["2"] {
		t.Errorf("dead worker reported %d times, want once per request that touched it (%d)", deadReports, attempts["2"])
	}
}

func TestRetryOnRetryableStatus(t *testing.T) {
	e := newEnv(t, Config{Policy: "round_robin"})
	var bad, good atomic.Int32
	_, badW := e.upstream(func(rw http.ResponseWriter, r *http.Request) {
		bad.Add(1)
		rw.WriteHeader(503)
	})
	_, goodW := e.upstream(func(rw http.ResponseWriter, r *http.Request) { good.Add(1); okHandler("good")(rw, r) })
	// A worker's retries series is made at its first retry, not when the worker is added.
	if n := counterValue(t, e, "meshgw_worker_retries_total", map[string]string{"worker": badW.URL}); n != -1 {
		t.Fatalf("retries series of a worker that never retried: %v, want none", n)
	}
	for i := 0; i < 4; i++ {
		if status, _, _ := e.post("/v1/completions", `{"prompt":"x"}`); status != 200 {
			t.Fatalf("status %d, want 200 after a retry", status)
		}
	}
	if good.Load() != 4 || bad.Load() == 0 {
		t.Errorf("good=%d bad=%d", good.Load(), bad.Load())
	}
	for _, o := range e.outcomesCopy() {
		if o.worker == badW.ID && o.status != 503 {
			t.Errorf("bad worker outcome %+v, want status 503", o)
		}
	}
	if len(e.sleeps) == 0 || e.sleeps[0] < 40*time.Millisecond || e.sleeps[0] > 60*time.Millisecond {
		t.Errorf("backoff sleeps %v, want the first near 50ms", e.sleeps)
	}
	if n := counterValue(t, e, "meshgw_worker_retries_total", map[string]string{"worker": badW.URL}); n != float64(bad.Load()) {
		t.Errorf("retries of the failing worker = %v, want %d", n, bad.Load())
	}
	if n := counterValue(t, e, "meshgw_worker_retries_total", map[string]string{"worker": goodW.URL}); n != -1 {
		t.Errorf("retries series of a worker that never failed: %v, want none", n)
	}
}

func TestRetriesExhaustedPassLastAnswer(t *testing.T) {
	e := newEnv(t, Config{Retry: RetryConfig{MaxAttempts: 3}})
	var hits atomic.Int32
	e.upstream(func(rw http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(429)
		_, _ = io.WriteString(rw, `{"error":"busy"}`)
	})
	status, hdr, body := e.post("/v1/completions", `{}`)
	if status != 429 || body != `{"error":"busy"}` || hits.Load() != 3 || hdr.Get("X-Mesh-Route-Attempt") != "3" {
		t.Errorf("got %d %q after %d hits, attempt %q; want the worker's 429 after 3 attempts", status, body, hits.Load(), hdr.Get("X-Mesh-Route-Attempt"))
	}
	if n := len(e.outcomesCopy()); n != 1 {
		t.Errorf("%d outcomes for one worker retried 3 times, want 1", n)
	}
}

func TestRetryOverrides(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		spec  func(*worker.Spec)
		calls int32
	}{
		{"disable-retries flag", Config{Retry: RetryConfig{Disabled: true}}, nil, 1},
		{"worker disable_retry", Config{}, func(s *worker.Spec) { t := true; s.Resilience = &worker.Resilience{DisableRetry: &t} }, 1},
		{"worker max_retries", Config{}, func(s *worker.Spec) { n := 2; s.Resilience = &worker.Resilience{MaxRetries: &n} }, 2},
		// The list only classifies outcomes for the breaker (TestWorkerRetryableCodesDoNotChangeRetries).
		{"worker retryable codes", Config{}, func(s *worker.Spec) { s.Resilience = &worker.Resilience{RetryableStatusCodes: []int{500}} }, DefaultMaxAttempts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.cfg)
			var hits atomic.Int32
			var mut []func(*worker.Spec)
			if tt.spec != nil {
				mut = append(mut, tt.spec)
			}
			e.upstream(func(rw http.ResponseWriter, r *http.Request) { hits.Add(1); rw.WriteHeader(503) }, mut...)
			if status, _, _ := e.post("/v1/completions", `{}`); status != 503 {
				t.Errorf("status %d", status)
			}
			if hits.Load() != tt.calls {
				t.Errorf("%d attempts, want %d", hits.Load(), tt.calls)
			}
		})
	}
}

func TestNoAvailableWorkers(t *testing.T) {
	e := newEnv(t, Config{})
	status, _, body := e.post("/v1/chat/completions", `{"model":"x"}`)
	if status != 503 || !strings.Contains(body, `"code":"no_available_workers"`) || !strings.Contains(body, `"type":"service_unavailable"`) || !strings.Contains(body, "no workers are registered") {
		t.Errorf("empty pool: %d %s", status, body)
	}
	e.upstream(okHandler("a"), func(s *worker.Spec) { s.Models = []string{"llama"} })
	status, _, body = e.post("/v1/chat/completions", `{"model":"mistral"}`)
	if status != 503 || !strings.Contains(body, `serves model \"mistral\"`) {
		t.Errorf("wrong model: %d %s", status, body)
	}
	status, _, body = e.post("/v1/chat/completions", `{"model":"llama","messages":[{"content":[{"type":"image_url"}]}]}`, "X-Mesh-Route-Capabilities", "image_input")
	if status != 200 {
		t.Errorf("a worker with all capabilities must serve an image request: %d %s", status, body)
	}
}

func TestUpstreamTimeoutIs504(t *testing.T) {
	e := newEnv(t, Config{RequestTimeout: 200 * time.Millisecond})
	release := make(chan struct{})
	defer close(release)
	e.upstream(func(rw http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	status, _, body := e.post("/v1/completions", `{}`)
	if status != 504 || !strings.Contains(body, `"code":504`) {
		t.Errorf("got %d %s, want 504", status, body)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, Config{})
	e.upstream(okHandler("a"))
	tests := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		contains                 string
	}{
		{"malformed JSON", "POST", "/v1/chat/completions", `{"model":`, nil, 400, "invalid_request_error"},
		{"not an object", "POST", "/v1/chat/completions", `[1]`, nil, 400, "must be a JSON object"},
		{"unknown route", "POST", "/v1/nothing", `{}`, nil, 404, `"type":"not_found_error"`},
		{"wrong method", "GET", "/v1/chat/completions", ``, nil, 405, `"code":405`},
		{"models wrong method", "POST", "/v1/models", `{}`, nil, 405, `"code":405`},
		{"hint conflict", "POST", "/v1/chat/completions", `{"model":"a"}`, []string{"X-Mesh-Route-Model", "b"}, 400, "X-Mesh-Route-Model"},
		{"bad stream hint", "POST", "/v1/completions", `{}`, []string{"X-Mesh-Route-Stream", "sometimes"}, 400, "X-Mesh-Route-Stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, e.base+tt.path, strings.NewReader(tt.body))
			for i := 0; i+1 < len(tt.hdr); i += 2 {
				req.Header.Set(tt.hdr[i], tt.hdr[i+1])
			}
			status, _, body := e.do(req)
			if status != tt.status || !strings.Contains(body, tt.contains) || !strings.HasPrefix(body, `{"error":{"message":`) {
				t.Errorf("got %d %s, want %d containing %q in the OpenAI envelope", status, body, tt.status, tt.contains)
			}
		})
	}
}

func TestModelsMerge(t *testing.T) {
	e := newEnv(t, Config{DefaultModel: "default-m"})
	e.upstream(okHandler("a"), func(s *worker.Spec) { s.Models = []string{"b", "a"} })
	e.upstream(okHandler("b"), func(s *worker.Spec) { s.Models = []string{"a", "c"} })
	_, w3 := e.upstream(okHandler("c"))
	e.upstream(okHandler("d"), func(s *worker.Spec) { s.Model = "hidden" })
	if _, err := e.gw.Pool().SetFlags(e.gw.Pool().Snapshot().Lookup("w-"+string(w3.ID[2:])).ID, false, false); err != nil {
		t.Fatal(err)
	}
	// Disable the worker declaring "hidden": unroutable workers are left out.
	for _, w := range e.gw.Pool().Snapshot().All {
		if len(w.Models) == 1 && w.Models[0] == "hidden" {
			if _, err := e.gw.Pool().SetFlags(w.ID, true, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	status, _, body := e.get("/v1/models")
	want := `{"object":"list","data":[{"id":"a","object":"model","created":0,"owned_by":"meshgw"},{"id":"b","object":"model","created":0,"owned_by":"meshgw"},{"id":"c","object":"model","created":0,"owned_by":"meshgw"},{"id":"default-m","object":"model","created":0,"owned_by":"meshgw"}]}`
	if status != 200 || body != want {
		t.Errorf("got %d\n%s\nwant\n%s", status, body, want)
	}
}

func TestBackoff(t *testing.T) {
	r := RetryConfig{InitialBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Multiplier: 2, Jitter: 0.2}
	tests := []struct {
		attempt int
		u       float64
		want    time.Duration
	}{
		{1, 0.5, 50 * time.Millisecond},
		{2, 0.5, 100 * time.Millisecond},
		{3, 0.5, 200 * time.Millisecond},
		{9, 0.5, 200 * time.Millisecond},
		{1, 0, 40 * time.Millisecond},
		{1, 1, 60 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.attempt), func(t *testing.T) {
			if got := backoff(r, tt.attempt, tt.u); got != tt.want {
				t.Errorf("backoff(%d, %v) = %v, want %v", tt.attempt, tt.u, got, tt.want)
			}
		})
	}
}

func TestTranscriptionsMultipartRoutedByHints(t *testing.T) {
	e := newEnv(t, Config{})
	got := make(chan string, 1)
	e.upstream(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.Header.Get("Content-Type") + "|" + string(b)
		_, _ = io.WriteString(rw, `{"text":"hi"}`)
	}, func(s *worker.Spec) { s.Models = []string{"whisper"}; s.Capabilities = []string{"audio_input"} })
	e.upstream(okHandler("chat-only"), func(s *worker.Spec) { s.Models = []string{"whisper"}; s.Capabilities = []string{"chat"} })
	body := "--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nRIFF....\r\n--XyZ--\r\n"
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("POST", e.base+"/v1/audio/transcriptions", strings.NewReader(body))
		req.Header.Set("Content-Type", "multipart/form-data; boundary=XyZ")
		req.Header.Set("X-Mesh-Route-Model", "whisper")
		status, _, answer := e.do(req)
		if status != 200 || answer != `{"text":"hi"}` {
			t.Fatalf("got %d %q; only the audio_input worker may serve it", status, answer)
		}
		if g := <-got; g != "multipart/form-data; boundary=XyZ|"+body {
			t.Fatalf("upstream got %q", g)
		}
	}
}
