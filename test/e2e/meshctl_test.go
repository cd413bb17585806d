package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// ctl runs the meshctl binary against one gateway with an admin key.
type ctl struct {
	bin, gateway, key string
	secrets           []string      // never to appear in meshctl's output
	wait              time.Duration // bounds one run; zero means 15 s
}

// run runs meshctl with args (and extra environment) and returns its exit status and output.
func (c *ctl) run(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	wait := c.wait
	if wait == 0 {
		wait = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = append([]string{"MESHCTL_GATEWAY=" + c.gateway, "MESHCTL_ADMIN_KEY=" + c.key}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("meshctl %v: %v", args, err)
	}
	for _, s := range append(c.secrets, c.key) {
		if s != "" && strings.Contains(stdout.String()+stderr.String(), s) {
			t.Fatalf("meshctl %v printed a secret", args)
		}
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// must runs meshctl and fails the test unless it exits 0.
func (c *ctl) must(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := c.run(t, nil, args...)
	if code != 0 {
		t.Fatalf("meshctl %v: exit %d: %s", args, code, stderr)
	}
	return stdout
}

// record reads one worker with `meshctl workers get -o json`.
func (c *ctl) record(t *testing.T, ref string) adminRecord {
	t.Helper()
	var r adminRecord
	if err := json.Unmarshal([]byte(c.must(t, "workers", "get", ref, "-o", "json")), &r); err != nil {
		t.Fatalf("workers get -o json: %v", err)
	}
	return r
}

// TestMeshctl drives a real gateway with the meshctl binary the way an operator would: add a
// worker, list it, disable it and see it unroutable, enable it, remove it, and the refusals
// that exit 1 with the gateway's code.
func TestMeshctl(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	engine := harness.StartEngine(t, b, "engine-ctl")
	const key, workerKey = "sk-admin-ctl", "sk-worker-ctl-secret"
	gw := harness.StartGateway(t, b, "meshgw", "--node-id", "gw-ctl", "--admin-api-key", key,
		"--health-check-interval-secs", "1", "--drain-settle-secs", "1")
	c := &ctl{bin: b.Meshctl, gateway: gw.URL, key: key, secrets: []string{workerKey}}

	add := []string{"workers", "add", engine.URL, "--priority", "60", "--api-key-env", "WORKER_KEY"}
	harness.WaitFor(t, 20*time.Second, "meshctl workers add to succeed", func() bool {
		code, _, _ := c.run(t, []string{"WORKER_KEY=" + workerKey}, add...)
		return code == 0
	})
	rec := c.record(t, engine.URL)
	if !rec.HasAPIKey || rec.Priority != 60 || rec.Owner != "gw-ctl" {
		t.Fatalf("registered record %+v", rec)
	}
	harness.WaitFor(t, 15*time.Second, "the worker to be routable", func() bool { return c.record(t, rec.ID).Routable })
	if list := c.must(t, "workers", "list", "-o", "wide"); !strings.Contains(list, rec.ID) ||
		!strings.Contains(list, engine.URL) || !strings.Contains(list, "ROUTABLE") {
		t.Errorf("workers list -o wide:\n%s", list)
	}

	// Disable: the record says so, the table shows it, and the data plane stops routing to it.
	c.must(t, "workers", "disable", engine.URL, "--reason", "e2e")
	if r := c.record(t, rec.ID); !r.Disabled || r.Routable || r.DisabledReason != "e2e" {
		t.Errorf("after disable: %+v", r)
	}
	if row := c.must(t, "workers", "list"); !strings.Contains(row, "disabled") {
		t.Errorf("workers list shows no disabled flag:\n%s", row)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	harness.WaitFor(t, 10*time.Second, "no routable worker", func() bool { code, _, _ := chat(client, gw.URL, "x"); return code == 503 })
	c.must(t, "workers", "enable", rec.ID)
	harness.WaitFor(t, 10*time.Second, "the worker to route again", func() bool { code, _, _ := chat(client, gw.URL, "x"); return code == 200 })

	// Refusals exit 1 with the status and code on one line.
	code, _, stderr := c.run(t, nil, "workers", "add", engine.URL, "--priority", "1")
	if code != 1 || !strings.HasPrefix(stderr, "meshctl: 409 worker_exists:") {
		t.Errorf("another spec: exit %d, stderr %q", code, stderr)
	}
	wrong := &ctl{bin: b.Meshctl, gateway: gw.URL, key: "sk-wrong-key"}
	if code, _, stderr := wrong.run(t, nil, "workers", "list"); code != 1 || !strings.Contains(stderr, "401 unauthorized") {
		t.Errorf("wrong key: exit %d, stderr %q", code, stderr)
	}
	var raft struct{ Leader string }
	if err := json.Unmarshal([]byte(c.must(t, "raft", "-o", "json")), &raft); err != nil || raft.Leader != "gw-ctl" {
		t.Errorf("raft -o json: %v %+v", err, raft)
	}
	c.must(t, "status")

	// Remove drains for --drain-settle-secs, then the worker is gone.
	if out := c.must(t, "workers", "remove", engine.URL); !strings.Contains(out, "draining") || !strings.Contains(out, "1s") {
		t.Errorf("workers remove:\n%s", out)
	}
	harness.WaitFor(t, 10*time.Second, "the worker to be removed", func() bool {
		code, _, stderr := c.run(t, nil, "workers", "get", rec.ID)
		return code == 1 && strings.Contains(stderr, "404 worker_not_found")
	})
}
