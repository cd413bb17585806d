package gateway

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.Housekeeping()...) }

// testEnv is a gateway on 127.0.0.1 with in-test upstreams.
type testEnv struct {
	t        *testing.T
	gw       *Gateway
	base     string
	reg      *prometheus.Registry
	mu       sync.Mutex
	outcomes []outcome
	sleeps   []time.Duration
}

type outcome struct {
	worker  worker.ID
	status  int
	connErr bool
}

// newEnv starts a gateway whose retry sleeps are recorded, not waited.
func newEnv(t *testing.T, cfg Config) *testEnv {
	t.Helper()
	e := &testEnv{t: t, reg: prometheus.NewRegistry()}
	cfg.Registerer = e.reg
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NodeID == "" {
		cfg.NodeID = "gw-test"
	}
	cfg.Sleep = func(ctx context.Context, d time.Duration) error {
		e.mu.Lock()
		e.sleeps = append(e.sleeps, d)
		e.mu.Unlock()
		return ctx.Err()
	}
	cfg.OnOutcome = func(w *pool.Worker, status int, connErr bool) {
		e.mu.Lock()
		e.outcomes = append(e.outcomes, outcome{w.ID, status, connErr})
		e.mu.Unlock()
	}
	gw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- gw.Serve(gw.ClientListener(ln)) }() // as the daemon serves
	e.gw, e.base = gw, "http://"+ln.Addr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		http.DefaultClient.CloseIdleConnections()
	})
	return e
}

// add registers a worker and returns it.
func (e *testEnv) add(spec worker.Spec) *pool.Worker {
	e.t.Helper()
	w, _, err := e.gw.Pool().Upsert(spec, pool.OriginLocal)
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

// upstream starts an in-test worker and registers it.
func (e *testEnv) upstream(h http.HandlerFunc, mutate ...func(*worker.Spec)) (*httptest.Server, *pool.Worker) {
	e.t.Helper()
	srv := httptest.NewServer(h)
	e.t.Cleanup(srv.Close)
	spec := worker.Spec{URL: srv.URL}
	for _, m := range mutate {
		m(&spec)
	}
	return srv, e.add(spec)
}

func (e *testEnv) outcomesCopy() []outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]outcome(nil), e.outcomes...)
}

// post sends a JSON request and returns the status, headers and body.
func (e *testEnv) post(path, body string, hdr ...string) (int, http.Header, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.base+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return e.do(req)
}

func (e *testEnv) get(path string, hdr ...string) (int, http.Header, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.base+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return e.do(req)
}

func (e *testEnv) do(req *http.Request) (int, http.Header, string) {
	e.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// okHandler answers a small JSON completion naming the model it got.
func okHandler(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"served_by":"`+name+`"}`)
	}
}

// rawRequest writes raw bytes on a fresh TCP connection and reads the answer's status line and
// headers within the deadline.
func rawRequest(t *testing.T, addr, raw string, deadline time.Duration) (status string, head string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(deadline))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tmp := make([]byte, 4096)
	for !bytes.Contains(buf.Bytes(), []byte("\r\n\r\n")) {
		n, err := conn.Read(tmp)
		buf.Write(tmp[:n])
		if err != nil {
			t.Fatalf("reading the answer: %v (got %q)", err, buf.String())
		}
	}
	head = buf.String()
	status, _, _ = strings.Cut(head, "\r\n")
	return status, head
}
