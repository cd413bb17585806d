package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// Every answer of a model route carries its own request id, as X-Mesh-Request-Id and as
// X-Request-Id (what OpenAI's SDKs read): the client's x-request-id when it sent one, else a
// fresh id, never one left from an earlier request.
func TestEveryAnswerCarriesItsOwnRequestID(t *testing.T) {
	e := newEnv(t, Config{MaxPayload: 1 << 20})
	e.upstream(okHandler("a"), func(s *worker.Spec) { s.Models = []string{"m"} })
	tests := []struct {
		name, method, path, body string
		status                   int
	}{
		{"served", "POST", "/v1/chat/completions", `{"model":"m"}`, 200},
		{"body does not parse", "POST", "/v1/chat/completions", `{"model":`, 400},
		{"hint conflict", "POST", "/v1/chat/completions", `{"model":"m","stream":true}`, 400},
		{"no worker", "POST", "/v1/chat/completions", `{"model":"other"}`, 503},
		{"wrong method", "GET", "/v1/chat/completions", ``, 405},
		{"too large", "POST", "/v1/completions", `{"prompt":"` + strings.Repeat("x", 1<<20) + `"}`, 413},
		{"models", "GET", "/v1/models", ``, 200},
		{"models wrong method", "POST", "/v1/models", `{}`, 405},
	}
	// Ids from earlier requests on the same connections must not leak: alternate requests with
	// and without the client's id, on one keep-alive client.
	for round := 0; round < 3; round++ {
		for _, tt := range tests {
			for _, own := range []string{"client-77", ""} {
				req, err := http.NewRequest(tt.method, e.base+tt.path, strings.NewReader(tt.body))
				if err != nil {
					t.Fatal(err)
				}
				if tt.name == "hint conflict" {
					req.Header.Set("X-Mesh-Route-Stream", "false")
				}
				if own != "" {
					req.Header.Set("x-request-id", own+"-"+tt.name)
				}
				status, hdr, body := e.do(req)
				if status != tt.status {
					t.Fatalf("%s: %d %s, want %d", tt.name, status, body, tt.status)
				}
				mesh, client := hdr.Get("X-Mesh-Request-Id"), hdr.Get("X-Request-Id")
				switch {
				case own != "" && (mesh != own+"-"+tt.name || client != mesh):
					t.Errorf("%s with x-request-id %q: X-Mesh-Request-Id %q, X-Request-Id %q", tt.name, own+"-"+tt.name, mesh, client)
				case own == "" && (mesh == "" || client != mesh || strings.HasPrefix(mesh, "client-77")):
					t.Errorf("%s without an id: X-Mesh-Request-Id %q, X-Request-Id %q, want one fresh id in both", tt.name, mesh, client)
				}
			}
		}
	}
}

// Concurrent clients, each with its own ids, never see another's: bad bodies (refused before
// the headers are prepared) interleaved with served requests on pooled calls.
func TestRequestIDsUnderConcurrency(t *testing.T) {
	e := newEnv(t, Config{})
	e.upstream(okHandler("a"))
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			for i := 0; i < 25; i++ {
				id := fmt.Sprintf("client-%d-%d", c, i)
				body := `{"prompt":"x"}`
				if i%2 == 0 {
					body = `{"prompt":`
				}
				req, _ := http.NewRequest("POST", e.base+"/v1/completions", strings.NewReader(body))
				req.Header.Set("x-request-id", id)
				resp, err := client.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if got := resp.Header.Get("X-Mesh-Request-Id"); got != id || resp.Header.Get("X-Request-Id") != id {
					errs <- fmt.Sprintf("%s (status %d): X-Mesh-Request-Id %q, X-Request-Id %q", id, resp.StatusCode, got, resp.Header.Get("X-Request-Id"))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// The gateway's own 502 (the worker gave no answer) and 504 name the worker and the attempt,
// as a worker's own answer does, so that an operator can tell them apart.
func TestGatewayFailureNamesTheWorker(t *testing.T) {
	e := newEnv(t, Config{NodeID: "gw-a", Retry: RetryConfig{MaxAttempts: 2}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := e.add(worker.Spec{URL: "http://" + ln.Addr().String()})
	ln.Close() // connections are refused from now on
	status, hdr, body := e.post("/v1/completions", `{"prompt":"x"}`, "x-request-id", "r-502")
	if status != 502 || !strings.Contains(body, "upstream request failed") {
		t.Fatalf("got %d %s, want the gateway's 502", status, body)
	}
	want := map[string]string{"X-Mesh-Worker": string(dead.ID), "X-Mesh-Route-Attempt": "2", "X-Mesh-Owner": "gw-a",
		"X-Mesh-Gateway": "gw-a", "X-Mesh-Request-Id": "r-502", "X-Request-Id": "r-502"}
	for k, v := range want {
		if got := hdr.Get(k); got != v {
			t.Errorf("502: %s = %q, want %q", k, got, v)
		}
	}
}

func TestGatewayTimeoutNamesTheWorker(t *testing.T) {
	e := newEnv(t, Config{NodeID: "gw-a", RequestTimeout: 200 * time.Millisecond})
	release := make(chan struct{})
	defer close(release)
	_, w := e.upstream(func(rw http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	status, hdr, _ := e.post("/v1/completions", `{}`)
	if status != 504 || hdr.Get("X-Mesh-Worker") != string(w.ID) || hdr.Get("X-Mesh-Route-Attempt") != "1" || hdr.Get("X-Mesh-Owner") != "gw-a" {
		t.Errorf("504: %d, X-Mesh-Worker %q, attempt %q, owner %q", status, hdr.Get("X-Mesh-Worker"), hdr.Get("X-Mesh-Route-Attempt"), hdr.Get("X-Mesh-Owner"))
	}
}
