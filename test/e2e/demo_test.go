package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// demoBound bounds one start of scripts/demo.sh: three gateways and three engines, ready.
const demoBound = 60 * time.Second

// demoRun is one run of scripts/demo.sh.
type demoRun struct {
	proc  *harness.Proc
	ready atomic.Bool // it printed "Press Ctrl-C"
}

// startDemo runs scripts/demo.sh (what make demo runs) with env and waits until it prints its
// lines to try.
func startDemo(t *testing.T, env []string) *demoRun {
	t.Helper()
	d := &demoRun{}
	script := filepath.Join(harness.ModuleRoot(), "scripts", "demo.sh")
	d.proc = harness.Start(t, "demo", "/usr/bin/env", []string{"bash", script}, env, func(line string) {
		if strings.Contains(line, "Press Ctrl-C to stop.") {
			d.ready.Store(true)
		}
	})
	harness.WaitFor(t, demoBound, "the demo to print what to try", func() bool {
		if d.proc.Exited() {
			t.Fatalf("the demo exited:\n%s", d.proc.Output())
		}
		return d.ready.Load()
	})
	return d
}

// stop sends Ctrl-C (SIGINT) to the script, which stops what it started, and waits for it.
func (d *demoRun) stop(t *testing.T) {
	t.Helper()
	if err := d.proc.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if _, err := d.proc.Wait(30 * time.Second); err != nil && !d.proc.Exited() {
		t.Fatalf("the demo did not stop after Ctrl-C: %v", err)
	}
}

// TestDemoRestartKeepsTheDisable: make demo, a disable through demo-2, Ctrl-C, make demo again:
// the mesh comes back (demo-1 alone serves its last applied state until demo-2 and demo-3
// join), with the worker still disabled.
func TestDemoRestartKeepsTheDisable(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	port, metrics, mesh, engines := harness.FreePorts(t, 3), harness.FreePorts(t, 3), harness.FreePorts(t, 23), harness.FreePorts(t, 3)
	state := t.TempDir()
	env := []string{"BIN=" + filepath.Dir(b.Meshgw), "DEMO_PORT=" + strconv.Itoa(port),
		"DEMO_METRICS_PORT=" + strconv.Itoa(metrics), "DEMO_MESH_PORT=" + strconv.Itoa(mesh),
		"ENGINE_BASE=" + strconv.Itoa(engines), "DEMO_STATE_DIR=" + state, "DEMO_LOG_DIR=" + t.TempDir()}
	gw := func(i int) *harness.Gateway {
		return &harness.Gateway{Proc: &harness.Proc{URL: "http://127.0.0.1:" + strconv.Itoa(port+i)}}
	}
	engine := "http://127.0.0.1:" + strconv.Itoa(engines+2)
	path := "/workers/" + url.PathEscape(engine)

	d := startDemo(t, env)
	harness.WaitFor(t, clusterBound, "a disable through demo-2", func() bool {
		code, _ := newAdmin(gw(1), "").do(t, "PUT", path, `{"disabled":true,"reason":"demo restart test"}`)
		return code == http.StatusOK
	})
	harness.WaitFor(t, clusterBound, "demo-1 shows the disable", func() bool {
		return workerDisabled(t, gw(0), engine)
	})
	d.stop(t)

	startDemo(t, env)
	for i := range 3 {
		if !workerDisabled(t, gw(i), engine) {
			t.Errorf("demo-%d does not show %s disabled after the restart", i+1, engine)
		}
	}
	e3 := &harness.Proc{URL: engine}
	before, _ := engineStats(t, e3, "demo-3")
	sendChats(t, gw(2), 10, http.StatusOK)
	if after, _ := engineStats(t, e3, "demo-3"); after != before {
		t.Errorf("the disabled engine got %d requests through demo-3 after the restart", after-before)
	}
}

// workerDisabled reports whether g's GET /workers lists u as disabled.
func workerDisabled(t *testing.T, g *harness.Gateway, u string) bool {
	t.Helper()
	code, body := newAdmin(g, "").do(t, "GET", "/workers", "")
	var l struct {
		Workers []adminRecord `json:"workers"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &l) != nil {
		return false
	}
	for _, w := range l.Workers {
		if w.URL == u {
			return w.Disabled
		}
	}
	return false
}
