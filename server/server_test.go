package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/harness"
	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/testkit"
)

// TestMain fails the package's tests when a goroutine of a gateway they ran (a loop, a server,
// a raft or mesh worker) outlives it, and removes the grpc_health_probe that test/harness built
// for them (cleanRun).
func TestMain(m *testing.M) { goleak.VerifyTestMain(cleanRun{m}, testkit.Housekeeping()...) }

// cleanRun runs the tests, then removes the binaries test/harness compiled for them.
type cleanRun struct{ m *testing.M }

func (r cleanRun) Run() int { return harness.Main(r.m) }

// adminKey is the admin key of the gateways the tests start: the cluster key (raft, gRPC) and
// the gossip key derive from it, so the tests run those proofs too.
const adminKey = "sk-test-admin"

// testGateway is one whole gateway a test started from a Config.
type testGateway struct {
	*Server
	url    string
	logs   *logbuf.Buffer
	client *http.Client
	cancel context.CancelFunc
	done   chan error
}

// testConfig is a gateway on 127.0.0.1 with every port picked by the kernel, raft in memory
// with a test's timeouts, the local mesh profile, no health checks, no settle window, and a
// grace at shutdown that any request of a test's fits in.
func testConfig(t *testing.T, logs *logbuf.Buffer) Config {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cfg := Config{
		Listener: ln,
		Health:   health.DefaultConfig(),
		Breaker:  breaker.DefaultConfig(),
		Cluster: ClusterConfig{MeshBind: "127.0.0.1", MeshProfile: mesh.ProfileLocal, MeshAdvertise: "127.0.0.1",
			RPCBind: "127.0.0.1", RPCAdvertise: "127.0.0.1", HTTPAdvertise: "127.0.0.1"},
		ProbeAddr:     "127.0.0.1:0",
		MetricsAddr:   "127.0.0.1:0",
		ShutdownGrace: testkit.Deadline,
		Getenv:        func(string) string { return "" },
		Logger:        logs.Logger(slog.LevelInfo),
	}
	cfg.Gateway.AdminAPIKey = adminKey
	cfg.Gateway.ShutdownSettle = -1
	cfg.Health.DisableHealthCheck = true
	cfg.Raft.BindAddr, cfg.Raft.Ephemeral, cfg.Raft.Tune = "127.0.0.1:0", true, testkit.FastRaft
	return cfg
}

// startGateway starts a gateway of testConfig, changed by adjust when not nil, and stops it
// at the end of the test (or by stop).
func startGateway(t *testing.T, adjust func(*Config)) *testGateway {
	t.Helper()
	g := &testGateway{logs: &logbuf.Buffer{}, client: &http.Client{Timeout: 10 * time.Second}, done: make(chan error, 1)}
	cfg := testConfig(t, g.logs)
	if adjust != nil {
		adjust(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("start: %v\n%s", err, g.logs.String())
	}
	g.Server, g.url = s, "http://"+s.Addr()
	var ctx context.Context
	ctx, g.cancel = context.WithCancel(context.Background())
	go func() { g.done <- s.Run(ctx) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of %s:\n%s", s.NodeID(), g.logs.String())
		}
		g.stop(t)
	})
	return g
}

// stop ends Run and waits for it; again, it does nothing. It may run on any goroutine.
func (g *testGateway) stop(t *testing.T) {
	t.Helper()
	g.cancel()
	select {
	case err, ok := <-g.done:
		if !ok {
			return
		}
		close(g.done)
		if err != nil {
			t.Errorf("%s: Run: %v", g.NodeID(), err)
		}
	case <-time.After(testkit.Deadline):
		t.Errorf("%s did not stop within %v", g.NodeID(), testkit.Deadline)
	}
	g.client.CloseIdleConnections()
}

// do sends a request with the admin key and returns the status and the body.
func (g *testGateway) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, g.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServesProbesAndMetrics: a started gateway serves its data plane, its probe listener and
// /metrics at the addresses it reports, logs its start line, and stops cleanly.
func TestServesProbesAndMetrics(t *testing.T) {
	g := startGateway(t, func(c *Config) { c.NodeID = "" })
	if want := nodeIDOf(g.cfg.Listener.Addr()); g.NodeID() != want {
		t.Errorf("node id %q, want the listener's host_port %q", g.NodeID(), want)
	}
	for _, url := range []string{g.url + "/liveness", "http://" + g.ProbeAddr() + "/liveness", "http://" + g.MetricsAddr() + "/metrics"} {
		resp, err := g.client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d", url, resp.StatusCode)
		}
	}
	if got := g.logs.Lines(`msg="meshgw started"`, "listen="+g.Addr(), "rpc="+g.RPCAddr(), "mesh="+g.MeshAddr(), "raft="+g.RaftAddr()); len(got) != 1 {
		t.Errorf("start lines %q, want one with every address", got)
	}
	if got := g.logs.Lines(`msg="meshgw started"`, "policy=cache_aware", "cache_rule=cost", "cache_scope="); len(got) != 1 {
		t.Errorf("start lines %q, want one naming the policy, its rule and its scope", got)
	}
	g.stop(t)
	if got := g.logs.Lines("msg=stopped"); len(got) != 1 {
		t.Errorf("stop lines %q, want one", got)
	}
}

// TestPprofRoutes: the profiler is served beside /metrics only when asked for, and never the
// command line, which may hold the admin key.
func TestPprofRoutes(t *testing.T) {
	tests := []struct {
		name   string
		on     bool
		path   string
		status int
	}{
		{"off by default", false, "/debug/pprof/", 404},
		{"index", true, "/debug/pprof/", 200},
		{"a named profile", true, "/debug/pprof/goroutine?debug=1", 200},
		{"no command line: it may hold the admin key", true, "/debug/pprof/cmdline", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mountPprof(mux, tt.on)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			resp, err := srv.Client().Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("GET %s = %d, want %d (%.80s)", tt.path, resp.StatusCode, tt.status, body)
			}
		})
	}
}

// TestNew: New starts nothing; it refuses a Config it cannot run (no listener, a gossip key
// file it could not read again, a certificate that does not name the node id), and logs the
// TLS warning of a gateway that runs without TLS by choice.
func TestNew(t *testing.T) {
	errNames := errors.New("the certificate names gw-x, not the node id")
	tests := []struct {
		name    string
		adjust  func(*Config)
		wantErr string
		wantLog string
	}{
		{"no listener", func(c *Config) { c.Listener = nil }, "Config.Listener is required", ""},
		{"a key file without its reader", func(c *Config) { c.Cluster.GossipKeyFile = "keys" }, "needs ReadGossipKeys", ""},
		{"a certificate of another node", func(c *Config) {
			c.NodeID = "gw-1"
			c.TLS.CheckNodeID = func(id string) error {
				if id != "gw-1" {
					t.Errorf("checked node id %q, want gw-1", id)
				}
				return errNames
			}
		}, errNames.Error(), ""},
		{"insecure", func(c *Config) { c.TLS.Insecure, c.TLS.Warning = true, "raft and gRPC run without TLS (--insecure)" }, "",
			`level=WARN msg="raft and gRPC run without TLS (--insecure)"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &logbuf.Buffer{}
			cfg := testConfig(t, logs)
			tt.adjust(&cfg)
			s, err := New(cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := logs.Lines(tt.wantLog); len(got) != 1 {
				t.Errorf("logs %q, want one line with %q", logs.String(), tt.wantLog)
			}
			if err := s.Run(context.Background()); !errors.Is(err, errNotStarted) {
				t.Errorf("Run before Start: %v, want errNotStarted", err)
			}
		})
	}
}

// TestStartFailureStopsWhatStarted: when a late part cannot start (its metric's name is taken
// in the registry), Start returns its error, and what started before it (raft, the mesh, the
// gRPC listener, the loops) is stopped again: raft and the mesh log their stop, and goleak
// (TestMain) finds nothing left. (A port in use fails before anything started:
// TestPortInUseFailsBeforeJoining.)
func TestStartFailureStopsWhatStarted(t *testing.T) {
	logs := &logbuf.Buffer{}
	cfg := testConfig(t, logs)
	cfg.Registry = prometheus.NewRegistry()
	cfg.Registry.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "meshgw_mesh_outcome_reports_total", Help: "taken"}))
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil || !strings.Contains(err.Error(), "outcome: register metrics") {
		t.Fatalf("Start: %v, want the outcome reports' error", err)
	}
	for _, stopped := range []string{`msg="raft stopped"`, `msg="mesh stopped"`} {
		if got := logs.Lines(stopped); len(got) != 1 {
			t.Errorf("%d lines with %s, want 1", len(got), stopped)
		}
	}
	if err := s.Run(context.Background()); !errors.Is(err, errNotStarted) {
		t.Errorf("Run after a failed Start: %v, want errNotStarted", err)
	}
}
