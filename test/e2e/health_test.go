package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// Fast health settings for the multi-process tests: a probe a second, F=2, S=2. The timeout is
// generous so that a loaded machine does not fail probes the test did not mean to fail. The
// breaker tests keep the default 60 s interval: only the first probe runs, which readies the
// worker, and health stays out of their way.
var fastHealth = []string{"--health-check-interval-secs", "1", "--health-failure-threshold", "2",
	"--health-success-threshold", "2", "--health-check-timeout-secs", "3"}

// gwWorker is one entry of GET /workers, as far as these tests read it.
type gwWorker struct {
	ID                  string `json:"id"`
	URL                 string `json:"url"`
	HealthState         string `json:"health_state"`
	Routable            bool   `json:"routable"`
	ConsecutiveFailures int    `json:"consecutive_failures"`
	LastError           string `json:"last_error"`
	Breaker             *struct {
		State string `json:"state"`
	} `json:"breaker"`
}

// workers returns the gateway's GET /workers by URL; nil when it did not answer.
func workers(t *testing.T, gw *harness.Gateway) map[string]gwWorker {
	t.Helper()
	resp, err := http.Get(gw.URL + "/workers")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var list struct {
		Workers []gwWorker `json:"workers"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&list) != nil {
		return nil
	}
	out := make(map[string]gwWorker, len(list.Workers))
	for _, w := range list.Workers {
		out[w.URL] = w
	}
	return out
}

// waitHealth waits until GET /workers shows the worker of url in state (or, for "gone", not at
// all).
func waitHealth(t *testing.T, gw *harness.Gateway, url, state string, within time.Duration) gwWorker {
	t.Helper()
	var last gwWorker
	harness.WaitFor(t, within, url+" is "+state, func() bool {
		ws := workers(t, gw)
		if ws == nil {
			return false
		}
		w, ok := ws[url]
		last = w
		if state == "gone" {
			return !ok
		}
		return ok && w.HealthState == state
	})
	return last
}

var controlLine = regexp.MustCompile(`fakeworker listening on \S+ \(.*control (\S+)\)`)

// control is the base URL of an engine's /_fault and /_stats, from its start line (a gRPC engine
// serves them on its own port, a ZMQ engine on its control port).
func control(e *harness.Proc) string {
	if m := controlLine.FindStringSubmatch(e.Output()); m != nil {
		return m[1]
	}
	return e.URL
}

func fault(t *testing.T, e *harness.Proc, body string) {
	t.Helper()
	resp, err := http.Post(control(e)+"/_fault", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /_fault %s: %d", body, resp.StatusCode)
	}
}

// engineStats returns the requests and probes an engine counted from gateway node.
func engineStats(t *testing.T, e *harness.Proc, node string) (requests, probes int64) {
	t.Helper()
	resp, err := http.Get(control(e) + "/_stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		ByGateway map[string]struct {
			Requests int64 `json:"requests"`
			Probes   int64 `json:"probes"`
		} `json:"by_gateway"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s.ByGateway[node].Requests, s.ByGateway[node].Probes
}

// workerConfig writes specs as a --worker-config file.
func workerConfig(t *testing.T, specs ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(specs)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "workers.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sendChats sends n chat requests and fails the test unless each answers want.
func sendChats(t *testing.T, gw *harness.Gateway, n, want int) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		code, body, err := chat(client, gw.URL, fmt.Sprintf("chat %d", i))
		if err != nil || code != want {
			t.Fatalf("request %d: status %d err %v body %.200s; want %d", i, code, err, body, want)
		}
	}
}

// An HTTP engine whose /health turns 503 leaves routing after F probes (no request reaches it,
// GET /workers shows not_ready) and comes back after S passing probes.
func TestHealthHTTPEngineLeavesAndRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	t.Parallel()
	b := harness.Build(t)
	sick := harness.StartEngine(t, b, "engine-sick")
	well := harness.StartEngine(t, b, "engine-well")
	// round_robin: the chats repeat, and cache_aware (the default) would keep each on the engine
	// that served it while the other was out.
	gw := harness.StartGateway(t, b, "meshgw", append([]string{"--node-id", "gw-health", "--policy", "round_robin",
		"--worker-urls", sick.URL + "," + well.URL}, fastHealth...)...)
	gw.WaitReady(t, 10*time.Second)
	waitHealth(t, gw, sick.URL, "ready", 10*time.Second)

	fault(t, sick, `{"health_status":503}`)
	w := waitHealth(t, gw, sick.URL, "not_ready", 10*time.Second)
	if w.Routable {
		t.Errorf("a not_ready worker is routable: %+v", w)
	}
	before, _ := engineStats(t, sick, "gw-health")
	sendChats(t, gw, 20, http.StatusOK)
	if after, _ := engineStats(t, sick, "gw-health"); after != before {
		t.Errorf("the not_ready engine got %d requests", after-before)
	}

	fault(t, sick, `{}`)
	waitHealth(t, gw, sick.URL, "ready", 10*time.Second)
	sendChats(t, gw, 20, http.StatusOK)
	if after, _ := engineStats(t, sick, "gw-health"); after == before {
		t.Error("the engine back in ready gets no requests")
	}
}

// A gRPC engine reporting NOT_SERVING leaves routing; with no ready worker left, readiness turns
// 503 and requests get 503 no_available_workers.
func TestHealthGRPCNotServing(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	t.Parallel()
	b := harness.Build(t)
	e := harness.StartEngine(t, b, "engine-grpc", "--mode", "grpc")
	gw := harness.StartGateway(t, b, "meshgw", append([]string{"--worker-urls", e.URL}, fastHealth...)...)
	gw.WaitReady(t, 10*time.Second)
	sendChats(t, gw, 3, http.StatusOK)

	fault(t, e, `{"health_status":503}`)
	w := waitHealth(t, gw, e.URL, "not_ready", 10*time.Second)
	if w.LastError != "NOT_SERVING" || w.ConsecutiveFailures < 2 || w.Routable {
		t.Errorf("GET /workers of the NOT_SERVING engine: %+v", w)
	}
	harness.WaitFor(t, 5*time.Second, "readiness 503", func() bool { return harness.Get(gw.URL+"/readiness") == http.StatusServiceUnavailable })
	resp, err := http.Get(gw.URL + "/readiness")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct{ Reason string }
	_ = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if ready.Reason != "insufficient healthy workers" {
		t.Errorf("readiness reason %q", ready.Reason)
	}
	code, body, err := chat(http.DefaultClient, gw.URL, "anyone?")
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "no_available_workers") {
		t.Errorf("chat with no ready worker: %d %v %s", code, err, body)
	}
}

// An external provider with health checks on (disable_health_check: false) stays healthy while
// its models endpoint answers 401 (Rolter's rules).
func TestHealthExternalUnauthorizedStaysHealthy(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	t.Parallel()
	var probes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			probes.Add(1)
		}
		http.Error(w, `{"error":"bad key"}`, http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	cfg := workerConfig(t, map[string]any{"url": srv.URL + "/v1", "connection_mode": "external", "provider": "openai",
		"api_key": "sk-provider", "health": map[string]any{"disable_health_check": false}})
	b := harness.Build(t)
	gw := harness.StartGateway(t, b, "meshgw", append([]string{"--worker-config", cfg}, fastHealth...)...)
	waitHealth(t, gw, srv.URL+"/v1", "ready", 10*time.Second)
	harness.WaitFor(t, 10*time.Second, "four probes", func() bool { return probes.Load() >= 4 })
	if w := workers(t, gw)[srv.URL+"/v1"]; w.HealthState != "ready" {
		t.Errorf("after 401 probes the provider is %q", w.HealthState)
	}
}

// The probe sends Authorization: Bearer <api_key> from --worker-config, and the key appears in
// no line of the gateway's output, failed probes and debug logs included.
func TestHealthProbeSendsKeyNeverLogged(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	t.Parallel()
	const key = "sk-e2e-probe-secret-5b1d"
	var mu sync.Mutex
	var seen []string
	var sick atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		if r.URL.Path == "/health" && sick.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[]}`))
	}))
	t.Cleanup(srv.Close)
	cfg := workerConfig(t, map[string]any{"url": srv.URL, "api_key": key})
	b := harness.Build(t)
	gw := harness.StartGateway(t, b, "meshgw", append([]string{"--worker-config", cfg, "--log-level", "debug"}, fastHealth...)...)
	waitHealth(t, gw, srv.URL, "ready", 10*time.Second)
	sendChats(t, gw, 2, http.StatusOK)
	sick.Store(true)
	waitHealth(t, gw, srv.URL, "not_ready", 10*time.Second)
	mu.Lock()
	probe := seen[0]
	mu.Unlock()
	if probe != "/health Bearer "+key {
		t.Errorf("first probe %q, want the bearer key on /health", probe)
	}
	out := gw.Output()
	if !strings.Contains(out, "health probe failed") {
		t.Fatalf("no debug line of a failed probe: the check below would prove nothing\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, key) {
			t.Errorf("the API key is in a log line: %s", line)
		}
	}
}

// With --remove-unhealthy-workers a failed worker is removed (gone from GET /workers); without
// it, the worker stays and rejoins in place when its engine comes back on the same address.
func TestHealthFailedWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	for _, remove := range []bool{true, false} {
		t.Run("remove="+strconv.FormatBool(remove), func(t *testing.T) {
			t.Parallel()
			b := harness.Build(t)
			port := strconv.Itoa(harness.FreePort(t))
			e := harness.StartEngine(t, b, "engine-doomed", "--port", port)
			keep := harness.StartEngine(t, b, "engine-kept")
			args := []string{"--worker-urls", e.URL + "," + keep.URL, "--health-check-interval-secs", "1",
				"--health-failure-threshold", "1", "--health-check-timeout-secs", "3"}
			if remove {
				args = append(args, "--remove-unhealthy-workers")
			}
			gw := harness.StartGateway(t, b, "meshgw", args...)
			waitHealth(t, gw, e.URL, "ready", 10*time.Second)
			e.Kill()
			if remove {
				waitHealth(t, gw, e.URL, "gone", 15*time.Second)
				return
			}
			waitHealth(t, gw, e.URL, "failed", 15*time.Second)
			back := harness.StartEngine(t, b, "engine-doomed", "--port", port)
			waitHealth(t, gw, back.URL, "ready", 10*time.Second)
			sendChats(t, gw, 10, http.StatusOK)
			if n, _ := engineStats(t, back, nodeIDOf(gw)); n == 0 {
				t.Error("the engine back on its address gets no requests")
			}
		})
	}
}

// nodeIDOf is the gateway's default node id: host_port of its listener.
func nodeIDOf(gw *harness.Gateway) string { return "127.0.0.1_" + strconv.Itoa(gw.Port) }

// A ZMQ engine killed and restarted on the same address rejoins by itself: its link notices the
// heartbeats stop (not_ready), reconnects and says HELLO again when the engine is back (ready),
// with no re-registration.
func TestHealthZMQEngineRestartRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	t.Parallel()
	b := harness.Build(t)
	port, ctl := strconv.Itoa(harness.FreePort(t)), strconv.Itoa(harness.FreePort(t))
	zmqArgs := []string{"--mode", "zmq", "--port", port, "--control-port", ctl, "--heartbeat-interval", "100ms"}
	e := harness.StartEngine(t, b, "engine-zmq", zmqArgs...)
	gw := harness.StartGateway(t, b, "meshgw", append([]string{"--node-id", "gw-zmq", "--worker-urls", e.URL}, fastHealth...)...)
	waitHealth(t, gw, e.URL, "ready", 10*time.Second)
	sendChats(t, gw, 3, http.StatusOK)

	e.Kill()
	w := waitHealth(t, gw, e.URL, "not_ready", 10*time.Second)
	if w.LastError == "" {
		t.Errorf("no last_error for the dead ZMQ engine: %+v", w)
	}
	back := harness.StartEngine(t, b, "engine-zmq", zmqArgs...)
	waitHealth(t, gw, back.URL, "ready", 15*time.Second)
	sendChats(t, gw, 3, http.StatusOK)
	requests, hellos := engineStats(t, back, "gw-zmq")
	if requests != 3 || hellos < 1 {
		t.Errorf("the restarted engine counted %d requests and %d HELLOs from the gateway, want 3 and at least 1", requests, hellos)
	}
}
