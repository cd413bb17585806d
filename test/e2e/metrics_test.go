package e2e

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// The health and breaker series carry the names and labels of DESIGN.md section 13 (SMG's, under
// the meshgw_ prefix), a removed worker's gauges read -1, and the whole /metrics text passes
// promtool check metrics.
func TestMetricsHealthAndBreakerSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run scripts/test-deps.sh (make test does); it comes from Debian's prometheus package")
	}
	b := harness.Build(t)
	open := harness.StartEngine(t, b, "engine-open")
	gone := harness.StartEngine(t, b, "engine-gone")
	// round_robin: every request is the same chat, which cache_aware (the default) would keep on
	// whichever engine served it first.
	gw := harness.StartGateway(t, b, "meshgw", "--policy", "round_robin", "--worker-urls", open.URL+","+gone.URL, "--remove-unhealthy-workers",
		"--health-check-interval-secs", "1", "--health-failure-threshold", "1", "--health-check-timeout-secs", "3",
		"--cb-failure-threshold", "1", "--disable-retries")
	waitHealth(t, gw, open.URL, "ready", 10*time.Second)
	waitHealth(t, gw, gone.URL, "ready", 10*time.Second)
	text := scrape(t, gw)
	if v := mustMetric(t, text, "meshgw_worker_cb_health_readmissions_total", "worker", open.URL); v != 0 {
		t.Errorf("readmissions published at %v, want 0", v)
	}

	fault(t, open, `{"error_status":500}`)
	client := &http.Client{Timeout: 10 * time.Second}
	harness.WaitFor(t, 10*time.Second, "the 500 engine's circuit opens", func() bool {
		_, _, _ = chat(client, gw.URL, "open it")
		v, _ := metricValue(scrape(t, gw), "meshgw_worker_cb_state", "worker", open.URL)
		return v == 1
	})
	gone.Kill()
	waitHealth(t, gw, gone.URL, "gone", 15*time.Second)

	text = scrape(t, gw)
	for _, s := range []struct {
		name   string
		labels []string
		want   func(float64) bool
		says   string
	}{
		{"meshgw_worker_health", []string{"worker", open.URL}, eq(1), "1 (ready)"},
		{"meshgw_worker_health", []string{"worker", gone.URL}, eq(-1), "-1 (removed)"},
		{"meshgw_worker_health_checks_total", []string{"worker_type", "http", "result", "success"}, positive, "> 0"},
		{"meshgw_worker_health_checks_total", []string{"worker_type", "http", "result", "failure"}, positive, "> 0"},
		{"meshgw_worker_cb_state", []string{"worker", open.URL}, eq(1), "1 (open)"},
		{"meshgw_worker_cb_state", []string{"worker", gone.URL}, eq(-1), "-1 (removed)"},
		{"meshgw_worker_cb_transitions_total", []string{"worker", open.URL, "from", "closed", "to", "open"}, eq(1), "1"},
		{"meshgw_worker_cb_outcomes_total", []string{"worker", open.URL, "outcome", "failure"}, positive, "> 0"},
		{"meshgw_worker_cb_outcomes_total", []string{"worker", open.URL, "outcome", "success"}, atLeast(0), ">= 0"},
		{"meshgw_worker_cb_consecutive_failures", []string{"worker", open.URL}, eq(1), "1"},
		{"meshgw_worker_cb_consecutive_successes", []string{"worker", open.URL}, eq(0), "0"},
		{"meshgw_worker_cb_health_readmissions_total", []string{"worker", open.URL}, eq(0), "0"},
	} {
		if v := mustMetric(t, text, s.name, s.labels...); !s.want(v) {
			t.Errorf("%s%v = %v, want %s", s.name, s.labels, v, s.says)
		}
	}

	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func eq(want float64) func(float64) bool     { return func(v float64) bool { return v == want } }
func atLeast(min float64) func(float64) bool { return func(v float64) bool { return v >= min } }
func positive(v float64) bool                { return v > 0 }
