package health

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// headerLog is an HTTP handler that records each request's headers and path and answers code.
type headerLog struct {
	mu   sync.Mutex
	code int
	reqs []*http.Request
}

func (h *headerLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.reqs = append(h.reqs, r.Clone(context.Background()))
	code := h.code
	h.mu.Unlock()
	w.WriteHeader(code)
	w.Write([]byte(`{"status":"ok"}`))
}

func (h *headerLog) last(t *testing.T) *http.Request {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.reqs) == 0 {
		t.Fatal("no request reached the server")
	}
	return h.reqs[len(h.reqs)-1]
}

func startServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		sharedEnginePool().closeIdle()
		providerClient().CloseIdleConnections()
	})
	return srv
}

func httpTarget(url string) Target {
	return Target{ID: "w-test", URL: url, Mode: worker.ModeHTTP, Endpoint: "/health", GatewayID: "gw-1"}
}

func TestHTTPProberStatus(t *testing.T) {
	tests := []struct {
		code int
		ok   bool
	}{{200, true}, {204, true}, {301, false}, {404, false}, {500, false}, {503, false}}
	for _, tc := range tests {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			h := &headerLog{code: tc.code}
			srv := startServer(t, h)
			err := (&HTTPProber{}).Probe(context.Background(), httpTarget(srv.URL))
			if (err == nil) != tc.ok {
				t.Fatalf("Probe() = %v, want ok %v", err, tc.ok)
			}
			if r := h.last(t); r.URL.Path != "/health" || r.Method != http.MethodGet {
				t.Errorf("probe was %s %s, want GET /health", r.Method, r.URL.Path)
			}
			if tc.ok {
				return
			}
			var pe *ProbeError
			if !errors.As(err, &pe) || pe.StatusCode != tc.code {
				t.Errorf("error %v does not carry status %d", err, tc.code)
			}
		})
	}
}

func TestHTTPProberHeaders(t *testing.T) {
	const key = "sk-engine-key-789"
	h := &headerLog{code: 503}
	srv := startServer(t, h)
	tg := httpTarget(srv.URL)
	tg.Endpoint = "/ready"
	tg.APIKey = key
	err := (&HTTPProber{}).Probe(context.Background(), tg)
	r := h.last(t)
	if got := r.Header.Get("Authorization"); got != "Bearer "+key {
		t.Errorf("Authorization = %q", got)
	}
	if got := r.Header.Get("X-Mesh-Gateway"); got != "gw-1" {
		t.Errorf("X-Mesh-Gateway = %q", got)
	}
	if r.URL.Path != "/ready" {
		t.Errorf("path = %q, want the configured endpoint", r.URL.Path)
	}
	if err == nil || strings.Contains(err.Error(), key) {
		t.Errorf("error %v: want a failure without the key", err)
	}
	tg.APIKey = ""
	(&HTTPProber{}).Probe(context.Background(), tg)
	if got := h.last(t).Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization without a key = %q", got)
	}
}

func TestHTTPProberTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	tg := httpTarget(srv.URL)
	tg.APIKey = "sk-timeout-key"
	err := (&HTTPProber{}).Probe(ctx, tg)
	var pe *ProbeError
	if !errors.As(err, &pe) || pe.Reason != "timeout" || !errors.Is(err, ErrTimeout) {
		t.Fatalf("Probe() = %v, want a timeout", err)
	}
	if strings.Contains(err.Error(), tg.APIKey) {
		t.Errorf("key in error %q", err)
	}
}

func TestHTTPProberConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	err = (&HTTPProber{}).Probe(context.Background(), httpTarget(url))
	var pe *ProbeError
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Reason, "connection error") || pe.StatusCode != 0 {
		t.Fatalf("Probe() = %v, want a connection error", err)
	}
}

// TestCheckerWithHTTPProber wires the real prober into a Checker on the real clock: the key and
// node id reach the engine, the key never reaches the logs.
func TestCheckerWithHTTPProber(t *testing.T) {
	const key = "sk-wired-key-000"
	h := &headerLog{code: 200}
	srv := startServer(t, h)
	var logs syncBuffer
	ready := make(chan State, 4)
	c, err := New(Options{
		Config: DefaultConfig(), NodeID: "gw-7",
		Modes:  map[string]Mode{worker.ModeHTTP: {Prober: &HTTPProber{}}},
		Logger: debugLogger(&logs),
		OnTransition: func(_ worker.ID, _, to State, _ bool) {
			ready <- to
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := worker.Spec{URL: srv.URL, APIKey: key, Health: &worker.Health{SuccessThreshold: ptr(1)}}
	if err := c.Add(s, Pending); err != nil {
		t.Fatal(err)
	}
	select {
	case to := <-ready:
		if to != Ready {
			t.Fatalf("first transition to %v, want ready", to)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("worker not ready within 10 s")
	}
	r := h.last(t)
	if r.Header.Get("Authorization") != "Bearer "+key || r.Header.Get("X-Mesh-Gateway") != "gw-7" {
		t.Errorf("headers = %v", r.Header)
	}
	c.Close()
	if out := logs.String(); strings.Contains(out, key) || !strings.Contains(out, "to=ready") {
		t.Errorf("logs (must show the change, never the key):\n%s", out)
	}
}

// BenchmarkHTTPProbe is the cost of one keep-alive probe of a loopback engine, the prober's part
// of the scheduler's budget: by prober (the default pool, or net/http as before through Client)
// and by engine (net/http's httptest server, whose cost is included, or a raw listener answering
// a fixed response, which leaves mostly the client's).
func BenchmarkHTTPProbe(b *testing.B) {
	probers := []struct {
		name string
		new  func() *HTTPProber
	}{
		{"pool", func() *HTTPProber { return &HTTPProber{pool: newEnginePool(nil)} }},
		{"nethttp", func() *HTTPProber {
			return &HTTPProber{Client: &http.Client{Transport: newTransport(nil), CheckRedirect: noRedirect}}
		}},
	}
	engines := []struct {
		name  string
		start func(b *testing.B) string
	}{
		{"httptest", func(b *testing.B) string {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Write([]byte(`{"status":"ok"}`))
			}))
			b.Cleanup(srv.Close)
			return srv.URL
		}},
		{"raw", func(b *testing.B) string { return startRawEngine(b, answerEach(okAnswer)).URL }},
	}
	for _, pr := range probers {
		for _, en := range engines {
			b.Run(pr.name+"/"+en.name, func(b *testing.B) {
				url := en.start(b)
				p := pr.new()
				b.Cleanup(func() {
					if p.pool != nil {
						p.pool.closeIdle()
					} else {
						p.Client.CloseIdleConnections()
					}
				})
				tg := httpTarget(url)
				tg.APIKey = "sk-bench-key"
				b.ReportAllocs()
				for b.Loop() {
					if err := p.Probe(context.Background(), tg); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
