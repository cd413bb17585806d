package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// tryLines returns the commands the demo printed under "Try:", each with its continuation lines
// joined, in order: the lines that start with two spaces and a non-space.
func tryLines(out string) []string {
	_, block, _ := strings.Cut(out, "Try:\n")
	block, _, _ = strings.Cut(block, "Press Ctrl-C to stop.")
	var cmds []string
	cont := false
	for _, line := range strings.Split(block, "\n") {
		switch {
		case cont:
			cmds[len(cmds)-1] += "\n" + line
		case strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   "):
			cmds = append(cmds, line)
		default:
			continue
		}
		cont = strings.HasSuffix(line, "\\")
	}
	return cmds
}

// TestDemoTryLinesWorkAsPrinted runs make demo's script, then every command it prints, as
// printed and in order, with bash: each exits 0 and does what its comment says. The
// breaker line sends the traffic that opens engine-3's breaker, whatever ran before.
func TestDemoTryLinesWorkAsPrinted(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	port, metrics, mesh, engines := harness.FreePorts(t, 3), harness.FreePorts(t, 3), harness.FreePorts(t, 23), harness.FreePorts(t, 3)
	env := []string{"BIN=" + filepath.Dir(b.Meshgw), "DEMO_PORT=" + strconv.Itoa(port),
		"DEMO_METRICS_PORT=" + strconv.Itoa(metrics), "DEMO_MESH_PORT=" + strconv.Itoa(mesh),
		"ENGINE_BASE=" + strconv.Itoa(engines), "DEMO_STATE_DIR=" + t.TempDir(), "DEMO_LOG_DIR=" + t.TempDir()}
	d := startDemo(t, env)
	defer d.stop(t)
	engine := func(i int) string { return "http://127.0.0.1:" + strconv.Itoa(engines+i) }
	demo1 := &harness.Gateway{Proc: &harness.Proc{URL: "http://127.0.0.1:" + strconv.Itoa(port)}}
	demo3 := &harness.Gateway{Proc: &harness.Proc{URL: "http://127.0.0.1:" + strconv.Itoa(port+2)}}
	indexOf := func(i int) int64 { return indexBytes(&harness.Gateway{MetricsPort: metrics + i}) }
	var firstTurn cachedTurn
	cmds := tryLines(d.proc.Output())
	if len(cmds) < 15 {
		t.Fatalf("found %d commands in:\n%s", len(cmds), d.proc.Output())
	}
	// The gateways discover the engines' models in the background; the models line lists them.
	harness.WaitFor(t, 20*time.Second, "the engines' models discovered", func() bool {
		_, models, err := discovered("http://127.0.0.1:" + strconv.Itoa(port))
		return err == nil && len(models) == 1
	})
	run := func(cmd string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", cmd)
		c.Dir = harness.ModuleRoot()
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s\nfailed: %v\n%s", cmd, err, out)
		}
		return string(out)
	}
	for _, cmd := range cmds {
		t.Logf("running: %s", cmd)
		out := run(cmd)
		want := ""
		switch {
		case strings.Contains(cmd, "cached_tokens") && !strings.Contains(cmd, "Which engine?"):
			// A chat's first turn through demo-1. A person types the next line seconds later; the
			// index reaches demo-2 well within that, and the test waits until it has.
			firstTurn = parseCachedTurn(t, cmd, out)
			harness.WaitFor(t, 10*time.Second, "demo-2's prefix index to hold what demo-1's does", func() bool {
				n := indexOf(0)
				return n > 0 && indexOf(1) == n
			})
		case strings.Contains(cmd, "cached_tokens"):
			// Its second turn through demo-2: the same engine, which reports the first turn's
			// whole blocks cached.
			second := parseCachedTurn(t, cmd, out)
			if second.worker != firstTurn.worker || second.gateway == firstTurn.gateway || second.cached <= 0 {
				t.Errorf("%s\nsecond turn %+v after first turn %+v: want the same worker through another gateway, "+
					"with cached tokens:\n%s", cmd, second, firstTurn, out)
			}
		case strings.Contains(cmd, `"stream":true`):
			want = "data: "
		case strings.Contains(cmd, "/v1/chat/completions"):
			want = "fake answer from engine-"
		case strings.Contains(cmd, "/v1/models"):
			want = `"fake-model"`
		case strings.Contains(cmd, "/metrics"):
			want = "meshgw_worker_health{"
		case strings.Contains(cmd, "/readiness"):
			want = `"status":"ready"`
		case strings.Contains(cmd, "route_completed"):
			want = "msg=route_completed"
		case strings.Contains(cmd, `"error_status":500`):
			// The line promises an open breaker: its own traffic must have opened it.
			harness.WaitFor(t, 10*time.Second, "a breaker open on demo-1 after: "+cmd, func() bool {
				return breakerOpen(t, demo1)
			})
		case strings.Contains(cmd, `"health_status":503`):
			// The owner's probes take it out of routing; demo-3 follows demo-1's bulletins.
			harness.WaitFor(t, 30*time.Second, "demo-3 to show engine-2 not_ready", func() bool {
				return workerHealth(t, demo3, engine(1)) == "not_ready"
			})
		case strings.Contains(cmd, "owners") && strings.Contains(cmd, strconv.Itoa(port+2)):
			if !rowHas(out, engine(1), "not_ready") {
				t.Errorf("%s\nshows no not_ready row for %s:\n%s", cmd, engine(1), out)
			}
		case strings.Contains(cmd, "owners"):
			if !rowHas(out, engine(2), "open") {
				t.Errorf("%s\nshows engine-3's breaker not open:\n%s", cmd, out)
			}
		case strings.Contains(cmd, "/_stats"):
			want = `"by_gateway"`
		case strings.Contains(cmd, "workers get"):
			want = "Transitions:"
		case strings.Contains(cmd, "/ui/api/snapshot"):
			want = `"peers":[{"id":"demo-1"`
		case strings.Contains(cmd, "peers"):
			want = "3 peers: 3 alive, leader demo-1"
		}
		if !strings.Contains(out, want) {
			t.Errorf("%s\nprinted no %q:\n%s", cmd, want, out)
		}
	}
}

// cachedTurn is what a turn of the demo's cache lines printed.
type cachedTurn struct {
	worker, gateway string
	cached          int
}

// parseCachedTurn reads the X-Mesh-Worker, X-Mesh-Gateway and cached_tokens lines out prints.
func parseCachedTurn(t *testing.T, cmd, out string) cachedTurn {
	t.Helper()
	var c cachedTurn
	seen := 0
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.Trim(k, `"`)) {
		case "x-mesh-worker":
			c.worker, seen = strings.TrimSpace(v), seen+1
		case "x-mesh-gateway":
			c.gateway, seen = strings.TrimSpace(v), seen+1
		case "cached_tokens":
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s\nprinted %q", cmd, line)
			}
			c.cached, seen = n, seen+1
		}
	}
	if seen != 3 || c.worker == "" || c.gateway == "" {
		t.Fatalf("%s\nprinted no worker, gateway and cached_tokens:\n%s", cmd, out)
	}
	return c
}

// rowHas reports whether a table line naming url also contains word.
func rowHas(table, url, word string) bool {
	for _, line := range strings.Split(table, "\n") {
		if strings.Contains(line, url+" ") && strings.Contains(" "+line+" ", " "+word+" ") {
			return true
		}
	}
	return false
}

// breakerOpen reports whether g's GET /workers shows a worker whose breaker is open.
func breakerOpen(t *testing.T, g *harness.Gateway) bool {
	t.Helper()
	_, body := newAdmin(g, "").do(t, "GET", "/workers", "")
	return strings.Contains(body, `"state":"open"`)
}

// workerHealth is g's health_state of the worker at url ("" when not listed).
func workerHealth(t *testing.T, g *harness.Gateway, url string) string {
	t.Helper()
	code, body := newAdmin(g, "").do(t, "GET", "/workers", "")
	if code != 200 {
		return ""
	}
	var l struct {
		Workers []adminRecord `json:"workers"`
	}
	if json.Unmarshal([]byte(body), &l) != nil {
		return ""
	}
	for _, w := range l.Workers {
		if w.URL == url {
			return w.HealthState
		}
	}
	return ""
}
