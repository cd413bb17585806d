package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshgw/meshgw/worker"
)

func workerSpec(url string) worker.Spec { return worker.Spec{URL: url} }

// holdUpstream answers only once release is closed, and signals each arrival on held.
func holdUpstream(held chan<- struct{}, release <-chan struct{}) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		held <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(rw, `{}`)
	}
}

func TestAdmissionRejectsAtOnceBeforeReadingBody(t *testing.T) {
	e := newEnv(t, Config{MaxInflight: 1})
	held, release := make(chan struct{}, 1), make(chan struct{})
	e.upstream(holdUpstream(held, release))
	first := make(chan int, 1)
	go func() {
		status, _, _ := e.post("/v1/completions", `{}`)
		first <- status
	}()
	<-held // one request in flight: the limit is reached

	status, hdr, body := e.post("/v1/completions", `{}`)
	if status != 503 || hdr.Get("Retry-After") != "1" || !strings.Contains(body, `"type":"overloaded_error","code":503`) {
		t.Errorf("second request: %d Retry-After=%q %s", status, hdr.Get("Retry-After"), body)
	}
	// Raw TCP: headers announcing a 10 MB body, and no body at all. The answer must come back
	// at once, which proves the body was not awaited.
	addr := strings.TrimPrefix(e.base, "http://")
	line, head := rawRequest(t, addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n", 3*time.Second)
	if line != "HTTP/1.1 503 Service Unavailable" || !strings.Contains(head, "Retry-After: 1") || !strings.Contains(head, "Connection: close") {
		t.Errorf("raw request: %q", head)
	}
	// Probes and admin routes are never gated.
	if status, _, _ := e.get("/health"); status != 200 {
		t.Errorf("/health gated: %d", status)
	}
	if status, _, _ := e.get("/status"); status != 200 {
		t.Errorf("/status gated: %d", status)
	}
	var st Status
	_, _, sbody := e.get("/status")
	if err := json.Unmarshal([]byte(sbody), &st); err != nil {
		t.Fatal(err)
	}
	if st.Admission.Inflight != 1 || st.Admission.MaxInflight != 1 || st.Admission.RejectedTotal != 2 || st.Admission.PeakInflight != 1 {
		t.Errorf("admission status %+v", st.Admission)
	}
	close(release)
	if s := <-first; s != 200 {
		t.Errorf("held request: %d", s)
	}
}

func TestPayloadLimit(t *testing.T) {
	e := newEnv(t, Config{MaxPayload: 1000})
	e.upstream(okHandler("a"))
	addr := strings.TrimPrefix(e.base, "http://")
	t.Run("content-length over the limit, no body sent", func(t *testing.T) {
		line, head := rawRequest(t, addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n", 3*time.Second)
		if line != "HTTP/1.1 413 Request Entity Too Large" || !strings.Contains(head, "Connection: close") {
			t.Errorf("got %q", head)
		}
	})
	t.Run("chunked body over the limit", func(t *testing.T) {
		chunk := strings.Repeat("x", 600)
		raw := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n", len(chunk), chunk, len(chunk), chunk)
		line, head := rawRequest(t, addr, raw, 3*time.Second)
		if line != "HTTP/1.1 413 Request Entity Too Large" || !strings.Contains(head, "Connection: close") {
			t.Errorf("got %q", head)
		}
	})
	t.Run("under the limit", func(t *testing.T) {
		if status, _, _ := e.post("/v1/completions", `{"prompt":"`+strings.Repeat("y", 900)+`"}`); status != 200 {
			t.Errorf("status %d", status)
		}
	})
}

func TestAutoAdmissionFollowsWorkerCount(t *testing.T) {
	e := newEnv(t, Config{})
	if got := e.gw.adm.max.Load(); got != 128 {
		t.Errorf("no workers: max %d, want 128", got)
	}
	for i := 0; i < 40; i++ {
		e.add(workerSpec(fmt.Sprintf("http://127.0.0.1:%d", 20000+i)))
	}
	if got := e.gw.adm.max.Load(); got != 4096 {
		t.Errorf("40 workers: max %d, want the 4096 cap", got)
	}
	for _, w := range e.gw.Pool().Snapshot().All[1:] {
		if err := e.gw.Pool().Remove(w.ID); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.gw.adm.max.Load(); got != 128 {
		t.Errorf("1 worker: max %d, want 128", got)
	}
}

func TestReadinessAndShutdown(t *testing.T) {
	e := newEnv(t, Config{})
	status, _, body := e.get("/readiness")
	if status != 503 || !strings.Contains(body, `"reason":"insufficient healthy workers"`) {
		t.Errorf("no workers: %d %s", status, body)
	}
	e.upstream(okHandler("a"))
	status, _, body = e.get("/ready")
	if status != 200 || body != `{"status":"ready","healthy_workers":1,"total_workers":1}` {
		t.Errorf("one worker: %d %s", status, body)
	}
	// Shutdown: readiness turns draining at once, while the settle window keeps the listener open.
	settle := make(chan struct{})
	released := make(chan struct{})
	e.gw.cfg.Sleep = func(ctx context.Context, d time.Duration) error {
		close(settle)
		<-released
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- e.gw.Shutdown(context.Background()) }()
	<-settle
	status, _, body = e.get("/readiness")
	if status != 503 || !strings.Contains(body, `"reason":"draining"`) {
		t.Errorf("draining: %d %s", status, body)
	}
	if status, _, _ := e.get("/liveness"); status != 200 {
		t.Errorf("liveness during shutdown: %d", status)
	}
	close(released)
	if err := <-done; err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

func TestProbeListener(t *testing.T) {
	e := newEnv(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.gw.ServeProbes(ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("probe listener /healthz: %d", resp.StatusCode)
	}
	resp, err = http.Get("http://" + ln.Addr().String() + "/workers")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("probe listener serves only probes, /workers: %d", resp.StatusCode)
	}
	if err := e.gw.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("probe serve: %v", err)
	}
}

// Without a raft leader a gateway is ready when it has routable workers (fail-static), and
// /status says there is no quorum; --readiness-requires-quorum makes it 503 "no quorum" instead.
func TestReadinessAndQuorum(t *testing.T) {
	var quorum atomic.Bool
	for _, requires := range []bool{false, true} {
		t.Run(fmt.Sprintf("requires quorum %v", requires), func(t *testing.T) {
			e := newEnv(t, Config{Quorum: quorum.Load, ReadinessRequiresQuorum: requires})
			e.upstream(okHandler("a"))
			quorum.Store(false)
			e.gw.refreshReadiness()
			status, _, body := e.get("/readiness")
			switch {
			case requires && (status != 503 || !strings.Contains(body, `"reason":"no quorum"`)):
				t.Errorf("no leader, quorum required: %d %s", status, body)
			case !requires && status != 200:
				t.Errorf("no leader, fail-static: %d %s", status, body)
			}
			if _, _, st := e.get("/status"); !strings.Contains(st, `"quorum":false`) {
				t.Errorf("/status without a leader: %s", st)
			}
			quorum.Store(true)
			e.gw.refreshReadiness()
			if status, _, body := e.get("/readiness"); status != 200 {
				t.Errorf("with a leader: %d %s", status, body)
			}
			if _, _, st := e.get("/status"); !strings.Contains(st, `"quorum":true`) {
				t.Errorf("/status with a leader: %s", st)
			}
		})
	}
}

// A client still sending a large body when the gateway refuses it reads the refusal, 503 at
// the in-flight limit or 413 over the payload limit, instead of a reset connection.
func TestRefusedUploadReadsItsAnswer(t *testing.T) {
	e := newEnv(t, Config{MaxPayload: 16 << 20, MaxInflight: 1})
	held, release := make(chan struct{}, 1), make(chan struct{})
	e.upstream(holdUpstream(held, release))
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before the upstream's Close, should the test fail early
	upload := func(body io.Reader) (int, string) {
		req, err := http.NewRequest(http.MethodPost, e.base+"/v1/audio/transcriptions", body)
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	big := strings.Repeat("u", 32<<20)
	if status, body := upload(strings.NewReader(big)); status != 413 {
		t.Errorf("over the payload limit: %d %s", status, body)
	}
	if status, body := upload(io.MultiReader(strings.NewReader(big))); status != 413 { // chunked
		t.Errorf("chunked over the payload limit: %d %s", status, body)
	}
	first := make(chan int, 1)
	go func() {
		status, _, _ := e.post("/v1/completions", `{}`)
		first <- status
	}()
	<-held
	if status, body := upload(strings.NewReader(big[:8<<20])); status != 503 || !strings.Contains(body, "overloaded_error") {
		t.Errorf("at the in-flight limit: %d %s", status, body)
	}
	releaseOnce()
	<-first
}

// TestWithdrawReadinessTurnsReadinessDraining: a gateway being drained answers readiness 503
// draining at once and keeps serving model requests; a later Shutdown still stops it.
func TestWithdrawReadinessTurnsReadinessDraining(t *testing.T) {
	e := newEnv(t, Config{})
	e.upstream(okHandler("a"))
	e.gw.refreshReadiness()
	if status, _, body := e.get("/readiness"); status != 200 {
		t.Fatalf("before: %d %s", status, body)
	}
	e.gw.WithdrawReadiness()
	if status, _, body := e.get("/readiness"); status != 503 || !strings.Contains(body, `"reason":"draining"`) {
		t.Errorf("after WithdrawReadiness: %d %s", status, body)
	}
	if status, _, body := e.post("/v1/chat/completions", `{"model":"m","messages":[]}`); status != 200 {
		t.Errorf("a model request after WithdrawReadiness: %d %s", status, body)
	}
	if err := e.gw.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !e.gw.Draining() {
		t.Error("Shutdown after WithdrawReadiness did not begin")
	}
}
