package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// scrape returns the gateway's /metrics text.
func scrape(t *testing.T, gw *harness.Gateway) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", gw.MetricsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

var labelPair = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// metricValue finds the series name whose labels include every pair of labels (name, value, ...)
// in a /metrics text; ok is false when there is none.
func metricValue(text, name string, labels ...string) (v float64, ok bool) {
	for _, line := range strings.Split(text, "\n") {
		rest, found := strings.CutPrefix(line, name+"{")
		if !found {
			continue
		}
		set, value, _ := strings.Cut(rest, "} ")
		have := map[string]string{}
		for _, m := range labelPair.FindAllStringSubmatch(set, -1) {
			have[m[1]] = m[2]
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && have[labels[i]] == labels[i+1]
		}
		if match {
			f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// mustMetric is metricValue that fails the test when the series is missing.
func mustMetric(t *testing.T, text, name string, labels ...string) float64 {
	t.Helper()
	v, ok := metricValue(text, name, labels...)
	if !ok {
		t.Fatalf("no series %s%v on /metrics", name, labels)
	}
	return v
}

// An engine answering 500 opens its circuit after the threshold and traffic moves to the other
// engine; its health stays ready the whole time.
func TestBreakerOpensOn500AndTrafficMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	t.Parallel()
	b := harness.Build(t)
	bad := harness.StartEngine(t, b, "engine-500")
	good := harness.StartEngine(t, b, "engine-ok")
	// round_robin: half the chats reach the bad engine, enough to open its circuit, whatever
	// the worker IDs (cache_aware, the default, spreads new chats by their hash).
	gw := harness.StartGateway(t, b, "meshgw", "--node-id", "gw-cb", "--policy", "round_robin", "--worker-urls", bad.URL+","+good.URL,
		"--cb-failure-threshold", "3", "--retry-initial-backoff-ms", "1", "--retry-max-backoff-ms", "5")
	gw.WaitReady(t, 10*time.Second)
	waitHealth(t, gw, bad.URL, "ready", 10*time.Second)
	waitHealth(t, gw, good.URL, "ready", 10*time.Second)
	fault(t, bad, `{"error_status":500}`)
	// Retries move each request that hit the bad engine to the good one: clients see no error.
	sendChats(t, gw, 12, http.StatusOK)
	text := scrape(t, gw)
	if v := mustMetric(t, text, "meshgw_worker_cb_state", "worker", bad.URL); v != 1 {
		t.Fatalf("meshgw_worker_cb_state of the 500 engine = %v, want 1 (open)", v)
	}
	if v := mustMetric(t, text, "meshgw_worker_cb_transitions_total", "worker", bad.URL, "from", "closed", "to", "open"); v != 1 {
		t.Errorf("closed->open transitions = %v, want 1", v)
	}
	if w := workers(t, gw)[bad.URL]; w.Breaker == nil || w.Breaker.State != "open" {
		t.Errorf("GET /workers breaker %+v, want open", w.Breaker)
	}
	before, _ := engineStats(t, bad, "gw-cb")
	sendChats(t, gw, 20, http.StatusOK)
	if after, _ := engineStats(t, bad, "gw-cb"); after != before {
		t.Errorf("the open circuit let %d requests through", after-before)
	}
	if w := workers(t, gw)[bad.URL]; w.HealthState != "ready" {
		t.Errorf("health of the 500 engine is %q; the breaker alone should take it out", w.HealthState)
	}
}

// Per status: 429 is a capacity answer (nothing recorded, the circuit never opens), 400 is a
// success, 500 a failure; --disable-circuit-breaker keeps the circuit closed while outcomes are
// still counted; and when every circuit is open, requests get 503 no_available_workers.
func TestBreakerOutcomesByStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	tests := []struct {
		name       string
		status     int
		disabled   bool
		successes  float64
		failures   float64
		wantState  float64
		afterwards int // the status a request gets after the ten
	}{
		{"429 never opens", 429, false, 0, 0, 0, 429},
		{"400 is a success", 400, false, 10, 0, 0, 400},
		{"500 opens", 500, false, 0, 2, 1, 503},
		{"500 with the breaker disabled", 500, true, 0, 10, 0, 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := harness.Build(t)
			e := harness.StartEngine(t, b, "engine-"+strconv.Itoa(tt.status))
			args := []string{"--worker-urls", e.URL, "--cb-failure-threshold", "2", "--disable-retries"}
			if tt.disabled {
				args = append(args, "--disable-circuit-breaker")
			}
			gw := harness.StartGateway(t, b, "meshgw", args...)
			gw.WaitReady(t, 10*time.Second)
			fault(t, e, fmt.Sprintf(`{"error_status":%d}`, tt.status))
			client := &http.Client{Timeout: 10 * time.Second}
			for i := range 10 {
				code, body, err := chat(client, gw.URL, "x")
				if err != nil || (code != tt.status && !(tt.status == 500 && !tt.disabled && i >= 2 && code == 503)) {
					t.Fatalf("request %d: %d %v %.200s", i, code, err, body)
				}
			}
			text := scrape(t, gw)
			if v := mustMetric(t, text, "meshgw_worker_cb_outcomes_total", "worker", e.URL, "outcome", "success"); v != tt.successes {
				t.Errorf("successes = %v, want %v", v, tt.successes)
			}
			if v := mustMetric(t, text, "meshgw_worker_cb_outcomes_total", "worker", e.URL, "outcome", "failure"); v != tt.failures {
				t.Errorf("failures = %v, want %v", v, tt.failures)
			}
			if v := mustMetric(t, text, "meshgw_worker_cb_state", "worker", e.URL); v != tt.wantState {
				t.Errorf("meshgw_worker_cb_state = %v, want %v", v, tt.wantState)
			}
			code, body, _ := chat(client, gw.URL, "after")
			if code != tt.afterwards {
				t.Errorf("request after the ten: %d %.200s, want %d", code, body, tt.afterwards)
			}
			if code == 503 && (!strings.Contains(body, `"code":"no_available_workers"`) || !strings.Contains(body, "open circuit breaker")) {
				t.Errorf("503 with every circuit open: %s", body)
			}
		})
	}
}

// With --retry-max-retries 5, a request retried five times on its only worker charges that
// worker's breaker one failure: two failed requests count two, not ten.
func TestBreakerRetriesChargeOneFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	t.Parallel()
	b := harness.Build(t)
	e := harness.StartEngine(t, b, "engine-retried")
	gw := harness.StartGateway(t, b, "meshgw", "--node-id", "gw-retry", "--worker-urls", e.URL,
		"--retry-max-retries", "5", "--retry-initial-backoff-ms", "1", "--retry-max-backoff-ms", "5")
	gw.WaitReady(t, 10*time.Second)
	fault(t, e, `{"error_status":500}`)
	sendChats(t, gw, 2, http.StatusInternalServerError)
	if n, _ := engineStats(t, e, "gw-retry"); n != 10 {
		t.Fatalf("the engine got %d attempts, want 2 requests × 5 attempts", n)
	}
	text := scrape(t, gw)
	if v := mustMetric(t, text, "meshgw_worker_cb_outcomes_total", "worker", e.URL, "outcome", "failure"); v != 2 {
		t.Errorf("failures charged = %v, want 2", v)
	}
	if v := mustMetric(t, text, "meshgw_worker_cb_consecutive_failures", "worker", e.URL); v != 2 {
		t.Errorf("consecutive failures = %v, want 2", v)
	}
}
