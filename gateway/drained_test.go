package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// heldUpstream holds its first n requests: it answers a plain one, or a stream after its first
// event, only once release is closed, and held gets a token as each is held. Later requests are
// answered at once. hits counts the requests it got.
func heldUpstream(n int32, held chan<- struct{}, release <-chan struct{}, hits *atomic.Int32) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		if hits.Add(1) > n {
			okHandler("unheld")(rw, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		stream := strings.Contains(string(b), `"stream":true`)
		if stream {
			rw.Header().Set("Content-Type", "text/event-stream")
			rw.WriteHeader(200)
			_, _ = io.WriteString(rw, "data: {\"i\":1}\n\n")
			rw.(http.Flusher).Flush()
		}
		held <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		if stream {
			_, _ = io.WriteString(rw, "data: [DONE]\n\n")
			return
		}
		_, _ = io.WriteString(rw, `{"served":true}`)
	}
}

// TestLeftMeshRefusesNewModelRequests: once the gateway leaves the mesh after its drain, its
// pool no longer follows the fleet, so a new data-plane request is not routed from it: it
// answers 503 draining in SMG's envelope, with Retry-After and Connection: close, and no worker
// sees it. The request and the stream already in flight finish; probes and /status answer;
// meshgw_draining_rejected_total counts the refusals.
func TestLeftMeshRefusesNewModelRequests(t *testing.T) {
	e := newEnv(t, Config{})
	var hits atomic.Int32
	held, release := make(chan struct{}, 2), make(chan struct{})
	e.upstream(heldUpstream(2, held, release, &hits))
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before the upstream's Close, should the test fail early

	// In flight as the gateway leaves: a plain request and a stream that sent its first event.
	plain := make(chan string, 1)
	go func() {
		resp, err := http.Post(e.base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[]}`))
		if err != nil {
			plain <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		plain <- fmt.Sprint(resp.StatusCode, " ", string(b), " ", err)
	}()
	<-held
	stream, err := http.Post(e.base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	br := bufio.NewReader(stream.Body)
	if ev := readEvent(t, br); stream.StatusCode != 200 || !strings.Contains(ev, `"i":1`) {
		t.Fatalf("the stream before the leave: %d %q", stream.StatusCode, ev)
	}
	<-held

	e.gw.WithdrawReadiness()
	e.gw.LeaveMesh()
	tests := []struct{ name, method, path, body string }{
		{"chat", http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[]}`},
		{"streamed chat", http.MethodPost, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[]}`},
		{"embeddings", http.MethodPost, "/v1/embeddings", `{"model":"m","input":"x"}`},
		{"models", http.MethodGet, "/v1/models", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, e.base+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body := string(b)
			if resp.StatusCode != 503 || !strings.Contains(body, `"type":"service_unavailable"`) || !strings.Contains(body, `"code":"draining"`) {
				t.Errorf("%s %s after the leave: %d %s", tt.method, tt.path, resp.StatusCode, body)
			}
			if resp.Header.Get("Retry-After") != "1" || !resp.Close || resp.Header.Get("X-Mesh-Gateway") != "gw-test" || resp.Header.Get("X-Mesh-Request-Id") == "" {
				t.Errorf("%s %s after the leave: Retry-After %q, close %v, headers %v", tt.method, tt.path, resp.Header.Get("Retry-After"), resp.Close, resp.Header)
			}
		})
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the worker got %d requests, want the 2 sent before the leave", n)
	}
	if status, _, _ := e.get("/liveness"); status != 200 {
		t.Errorf("liveness after the leave: %d", status)
	}
	if status, _, body := e.get("/readiness"); status != 503 || !strings.Contains(body, `"reason":"draining"`) {
		t.Errorf("readiness after the leave: %d %s", status, body)
	}
	if status, _, body := e.get("/status"); status != 200 {
		t.Errorf("/status after the leave: %d %s", status, body)
	}
	if n := counterValue(t, e, "meshgw_draining_rejected_total", nil); n != float64(len(tests)) {
		t.Errorf("meshgw_draining_rejected_total = %v, want %d", n, len(tests))
	}
	if n := counterValue(t, e, "meshgw_http_requests_total", map[string]string{"route": "/v1/chat/completions", "status": "503"}); n != 2 {
		t.Errorf("meshgw_http_requests_total{route=chat,status=503} = %v, want 2", n)
	}

	releaseOnce()
	if got := <-plain; !strings.HasPrefix(got, "200 ") {
		t.Errorf("the request in flight at the leave: %s", got)
	}
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "[DONE]") {
		t.Errorf("the stream in flight at the leave ended with %q, %v", rest, err)
	}
}

// TestLeftMeshRefusesAdminWrites: the admin API of a gateway that left the mesh tells a writer,
// or a reader through the raft leader, to go elsewhere (409 drained), rather than the retryable
// 503 no_leader of a gateway that will never hear a leader again. (This gateway has no raft
// node, so a consistent read shows the wiring: a write would answer read-only first.)
func TestLeftMeshRefusesAdminWrites(t *testing.T) {
	e := newEnv(t, Config{})
	e.gw.LeaveMesh()
	resp, err := http.Get(e.base + "/workers?consistent=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 409 || !strings.Contains(string(body), `"drained"`) {
		t.Fatalf("GET /workers?consistent=true after leaving: %d %s; want 409 drained", resp.StatusCode, body)
	}
}
