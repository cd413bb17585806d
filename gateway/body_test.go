package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	enginev1 "github.com/meshgw/meshgw/api/engine/v1"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

func (e *testEnv) status() Status {
	e.t.Helper()
	var st Status
	_, _, body := e.get("/status")
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		e.t.Fatal(err)
	}
	return st
}

// A request whose body does not fit in what is left of the budget waits the bound, then gets
// 503 overloaded_error with Retry-After, and the connection closes (fasthttp reads the first
// 8 KiB of a body before the handler runs; the rest would still be on the wire).
func TestBodyBudgetFullAnswers503AfterTheWait(t *testing.T) {
	const wait = 100 * time.Millisecond
	e := newEnv(t, Config{MaxBufferedBody: 1000, BodyBudgetWait: wait})
	held, release := make(chan struct{}, 1), make(chan struct{})
	e.upstream(holdUpstream(held, release))
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before the upstream's Close, should the test fail early
	first := make(chan int, 1)
	go func() {
		status, _, _ := e.post("/v1/completions", `{"prompt":"`+strings.Repeat("a", 787)+`"}`)
		first <- status
	}()
	<-held // 800 bytes of the 1000 are held
	if got := e.status().BodyBudget.BufferedBytes; got != 800 {
		t.Fatalf("buffered %d bytes, want 800", got)
	}

	start := time.Now()
	addr := strings.TrimPrefix(e.base, "http://")
	line, head := rawRequest(t, addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"+strings.Repeat(" ", 500), 5*time.Second)
	if waited := time.Since(start); waited < wait {
		t.Errorf("answered after %v, before the %v bound", waited, wait)
	}
	if line != "HTTP/1.1 503 Service Unavailable" || !strings.Contains(head, "Retry-After: 1") || !strings.Contains(head, "Connection: close") {
		t.Errorf("over the budget: %q", head)
	}
	status, hdr, body := e.post("/v1/completions", `{"prompt":"`+strings.Repeat("b", 300)+`"}`)
	if status != 503 || hdr.Get("Retry-After") != "1" || !strings.Contains(body, `"type":"overloaded_error","code":503`) {
		t.Errorf("over the budget: %d Retry-After=%q %s", status, hdr.Get("Retry-After"), body)
	}
	if st := e.status().BodyBudget; st.RefusedTotal != 2 || st.Waiting != 0 || st.MaxBufferedBytes != 1000 {
		t.Errorf("body budget %+v", st)
	}
	releaseOnce()
	if s := <-first; s != 200 {
		t.Errorf("held request: %d", s)
	}
	if st := e.status().BodyBudget; st.BufferedBytes != 0 || st.PeakBytes != 800 {
		t.Errorf("after the answers: %+v", st)
	}
}

// A waiting request goes ahead as soon as a body is given back within the bound.
func TestBodyBudgetWaiterGoesAheadWhenRoomFrees(t *testing.T) {
	e := newEnv(t, Config{MaxBufferedBody: 1000, BodyBudgetWait: time.Minute})
	held, release := make(chan struct{}, 2), make(chan struct{})
	e.upstream(holdUpstream(held, release))
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	results := make(chan int, 2)
	post := func(n int) {
		status, _, _ := e.post("/v1/completions", `{"prompt":"`+strings.Repeat("a", n-13)+`"}`)
		results <- status
	}
	go post(800)
	<-held
	go post(500)
	testkit.For(t, "the second request to wait for room", func() bool { return e.gw.budget.waiting.Load() == 1 })
	releaseOnce()
	for range 2 {
		if s := <-results; s != 200 {
			t.Errorf("status %d", s)
		}
	}
	if st := e.status().BodyBudget; st.RefusedTotal != 0 || st.PeakBytes != 800 || st.BufferedBytes != 0 {
		t.Errorf("body budget %+v", st)
	}
}

// bodyEcho answers the length and SHA-256 of the body it got, and counts its requests.
func bodyEcho(name string, status int, count *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"served_by":%q,"bytes":%d,"sha256":%q,"chunked":%v}`, name, n, hex.EncodeToString(h.Sum(nil)), r.ContentLength < 0)
	}
}

// A body larger than the whole budget is streamed to the worker, intact, with one attempt, and
// never held whole: routing reads its first bytes only. Smaller bodies are buffered and retried.
func TestBodyLargerThanTheBudgetIsStreamedOnce(t *testing.T) {
	const budget = 64 << 10
	e := newEnv(t, Config{MaxBufferedBody: budget, MaxPayload: 8 << 20})
	var nA, nB, nFail atomic.Int64
	e.upstream(bodyEcho("a", 200, &nA), func(s *worker.Spec) { s.Model = "model-a" })
	e.upstream(bodyEcho("b", 200, &nB), func(s *worker.Spec) { s.Model = "model-b" })
	e.upstream(bodyEcho("fail-1", 503, &nFail), func(s *worker.Spec) { s.Model = "model-f" })
	e.upstream(bodyEcho("fail-2", 503, &nFail), func(s *worker.Spec) { s.Model = "model-f" })
	body := func(model string, size int) string {
		head := `{"model":"` + model + `","prompt":"`
		return head + strings.Repeat("z", size-len(head)-2) + `"}`
	}
	tests := []struct {
		name     string
		model    string
		size     int
		chunked  bool
		want     int
		attempts int64
		streamed int64
	}{
		{"known length, over the budget", "model-b", 3 << 20, false, 200, 1, 1},
		{"chunked, over the budget", "model-b", 3 << 20, true, 200, 1, 1},
		{"known length, over the budget, worker fails", "model-f", 300 << 10, false, 503, 1, 1},
		{"chunked, over the budget, worker fails", "model-f", 300 << 10, true, 503, 1, 1},
		{"within the budget, worker fails: retried", "model-f", 10 << 10, false, 503, 5, 0},
		{"chunked within the budget, worker fails: retried", "model-f", 10 << 10, true, 503, 5, 0},
		{"within the budget", "model-a", 60 << 10, false, 200, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nA.Store(0)
			nB.Store(0)
			nFail.Store(0)
			before := e.status().BodyBudget.StreamedTotal
			payload := body(tt.model, tt.size)
			var r io.Reader = strings.NewReader(payload)
			if tt.chunked {
				r = io.MultiReader(r) // a reader of unknown length: sent chunked
			}
			req, err := http.NewRequest(http.MethodPost, e.base+"/v1/completions", r)
			if err != nil {
				t.Fatal(err)
			}
			status, _, answer := e.do(req)
			if status != tt.want {
				t.Fatalf("status %d: %s", status, answer)
			}
			if got := nA.Load() + nB.Load() + nFail.Load(); got != tt.attempts {
				t.Errorf("%d attempts, want %d", got, tt.attempts)
			}
			if tt.want == 200 {
				sum := sha256.Sum256([]byte(payload))
				var got struct {
					ServedBy string `json:"served_by"`
					Bytes    int    `json:"bytes"`
					SHA256   string `json:"sha256"`
					Chunked  bool   `json:"chunked"`
				}
				if err := json.Unmarshal([]byte(answer), &got); err != nil {
					t.Fatal(err)
				}
				if got.ServedBy != strings.TrimPrefix(tt.model, "model-") || got.Bytes != len(payload) || got.SHA256 != hex.EncodeToString(sum[:]) {
					t.Errorf("the worker got %+v; want %d bytes from the client, routed by the body's model %s", got, len(payload), tt.model)
				}
			}
			st := e.status().BodyBudget
			if st.StreamedTotal-before != tt.streamed || st.PeakBytes > budget || st.BufferedBytes != 0 {
				t.Errorf("body budget %+v; want %d more streamed, never over %d bytes", st, tt.streamed, budget)
			}
		})
	}
}

// A streamed body that runs past the payload limit is cut and answered 413, as a buffered one is.
func TestStreamedChunkedBodyOverThePayloadLimit(t *testing.T) {
	e := newEnv(t, Config{MaxBufferedBody: 64 << 10, MaxPayload: 1 << 20})
	var n atomic.Int64
	e.upstream(bodyEcho("a", 200, &n))
	req, err := http.NewRequest(http.MethodPost, e.base+"/v1/completions",
		io.MultiReader(strings.NewReader(`{"prompt":"`+strings.Repeat("z", 2<<20)+`"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := e.do(req); status != 413 {
		t.Errorf("status %d: %s", status, body)
	}
}

// A client still sending its body when the budget stays full reads the 503, not a reset.
func TestBudgetRefusalReadsItsAnswer(t *testing.T) {
	e := newEnv(t, Config{MaxBufferedBody: 1 << 20, BodyBudgetWait: 50 * time.Millisecond})
	held, release := make(chan struct{}, 1), make(chan struct{})
	e.upstream(holdUpstream(held, release))
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	first := make(chan int, 1)
	go func() {
		status, _, _ := e.post("/v1/completions", `{"prompt":"`+strings.Repeat("a", 900<<10)+`"}`)
		first <- status
	}()
	<-held
	req, err := http.NewRequest(http.MethodPost, e.base+"/v1/audio/transcriptions", strings.NewReader(strings.Repeat("u", 900<<10)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(b), "overloaded_error") {
		t.Errorf("budget full: %d %s", resp.StatusCode, b)
	}
	releaseOnce()
	<-first
}

// A body larger than the budget cannot go to a gRPC worker, whose transport takes a body whole:
// 413 naming the budget, the engine never called, no outcome charged to the worker.
func TestStreamedBodyRefusedForAGRPCWorker(t *testing.T) {
	e := newEnv(t, Config{MaxBufferedBody: 64 << 10})
	eng := &scriptedEngine{generate: func(*enginev1.GenerateRequest, grpc.ServerStreamingServer[enginev1.GenerateChunk]) error { return nil }}
	e.grpcWorker(eng)
	code, _, body := e.post("/v1/completions", `{"prompt":"`+strings.Repeat("z", 100<<10)+`"}`)
	if code != 413 || !strings.Contains(body, "--max-buffered-body-mb") || eng.calls() != 0 || len(e.outcomesCopy()) != 0 {
		t.Errorf("%d %s; engine calls %d, outcomes %v", code, body, eng.calls(), e.outcomesCopy())
	}
}
