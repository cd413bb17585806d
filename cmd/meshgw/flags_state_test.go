package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/testkit"
)

func TestStateFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, o *options)
	}{
		{"defaults", nil, nil, "", func(t *testing.T, o *options) {
			if o.state.raftPort != 39528 || o.state.stateDir != "" || o.state.ephemeral {
				t.Errorf("defaults %+v", o.state)
			}
		}},
		{"env state dir", nil, map[string]string{"MESHGW_STATE_DIR": "/var/lib/meshgw", "MESHGW_EPHEMERAL": "true"}, "", func(t *testing.T, o *options) {
			if o.state.stateDir != "/var/lib/meshgw" || !o.state.ephemeral {
				t.Errorf("env not applied: %+v", o.state)
			}
		}},
		{"advertise", []string{"--raft-advertise", "10.0.0.5:39528", "--raft-port", "0", "--insecure"}, nil, "", func(t *testing.T, o *options) {
			if o.state.raftAdvertise != "10.0.0.5:39528" || o.state.raftPort != 0 {
				t.Errorf("%+v", o.state)
			}
		}},
		{"raft port", []string{"--raft-port", "70000"}, nil, "--raft-port 70000 is not a port", nil},
		{"raft multiplier auto on a LAN", nil, nil, "", func(t *testing.T, o *options) {
			if o.state.raftMultiplier != 1 {
				t.Errorf("--raft-multiplier auto with --mesh-profile lan is %d; want 1", o.state.raftMultiplier)
			}
		}},
		{"raft multiplier auto on a WAN", []string{"--mesh-profile", "wan"}, nil, "", func(t *testing.T, o *options) {
			if o.state.raftMultiplier != wanRaftMultiplier {
				t.Errorf("--raft-multiplier auto with --mesh-profile wan is %d; want %d", o.state.raftMultiplier, wanRaftMultiplier)
			}
		}},
		{"raft multiplier set", []string{"--mesh-profile", "wan"}, map[string]string{"MESHGW_RAFT_MULTIPLIER": "5"}, "", func(t *testing.T, o *options) {
			if o.state.raftMultiplier != 5 {
				t.Errorf("--raft-multiplier 5 is %d", o.state.raftMultiplier)
			}
		}},
		{"raft multiplier above 10", []string{"--raft-multiplier", "11"}, nil, "--raft-multiplier 11 is outside 0-10", nil},
		{"raft multiplier negative", []string{"--raft-multiplier", "-1"}, nil, "--raft-multiplier -1 is outside 0-10", nil},
		{"advertise without port", []string{"--raft-advertise", "10.0.0.5"}, nil, `--raft-advertise "10.0.0.5" is not host:port`, nil},
		{"advertise unspecified", []string{"--raft-advertise", "0.0.0.0:39528"}, nil, "unspecified address", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(tt.args, tt.env)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				tt.check(t, o)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestRunRefusesUnusableStateDir: a state dir that cannot be made, or cannot be resolved, stops
// the gateway with exit 1 and one line naming the path and why; nothing falls back to /tmp.
func TestRunRefusesUnusableStateDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"under a file", []string{"--state-dir", filepath.Join(file, "state")}, nil, []string{filepath.Join(file, "state"), "not a directory"}},
		{"env under a file", nil, map[string]string{"MESHGW_STATE_DIR": filepath.Join(file, "env")}, []string{filepath.Join(file, "env")}},
		{"no home", nil, nil, []string{"state dir cannot be resolved", "--state-dir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			args := append([]string{"--host", "127.0.0.1", "--port", "0", "--prometheus-port", "0", "--raft-port", "0", "--mesh-port", "0", "--rpc-port", "0"}, tt.args...)
			code := run(args, env(tt.env), io.Discard, &stderr)
			out := stderr.String()
			if code != 1 || strings.Count(out, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q; want exit 1 and one line", code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("stderr %q lacks %q", out, w)
				}
			}
		})
	}
}

// daemon is an in-process meshgw run by a test.
type daemon struct {
	url    string
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan int
}

func startDaemon(t *testing.T, args ...string) *daemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &daemon{logs: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	args = append([]string{"--host", "127.0.0.1", "--port", "0", "--prometheus-port", "0", "--raft-port", "0", "--mesh-port", "0", "--rpc-port", "0",
		"--shutdown-settle-secs", "0", "--disable-health-check"}, args...)
	go func() { d.done <- runContext(ctx, args, env(nil), io.Discard, d.logs) }()
	listen := regexp.MustCompile(`msg="meshgw started" listen=(\S+)`)
	testkit.For(t, "the start line", func() bool {
		m := listen.FindStringSubmatch(d.logs.String())
		if m != nil {
			d.url = "http://" + m[1]
		}
		return m != nil
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", d.logs.String())
		}
		d.stop(t)
	})
	return d
}

func (d *daemon) stop(t *testing.T) {
	d.cancel()
	select {
	case code, ok := <-d.done:
		if !ok {
			return
		}
		if code != 0 {
			t.Errorf("exit %d; logs:\n%s", code, d.logs.String())
		}
		close(d.done)
	case <-time.After(15 * time.Second):
		t.Fatal("the daemon did not stop")
	}
	http.DefaultClient.CloseIdleConnections()
}

func (d *daemon) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, d.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRestartKeepsFlags: a worker disabled through the admin API stays disabled after a restart
// on the same state dir with the same --worker-urls, and the node's folder is private.
func TestRestartKeepsFlags(t *testing.T) {
	stateDir := t.TempDir()
	args := []string{"--state-dir", stateDir, "--node-id", "gw-1", "--worker-urls", "http://127.0.0.1:1"}
	d := startDaemon(t, args...)
	var rec struct {
		Disabled       bool   `json:"disabled"`
		DisabledReason string `json:"disabled_reason"`
		Owner          string `json:"owner"`
	}
	path := "/workers/http%3A%2F%2F127.0.0.1%3A1"
	testkit.For(t, "the command line's worker to be registered", func() bool { code, _ := d.do(t, "GET", path, ""); return code == 200 })
	if code, body := d.do(t, "PUT", path, `{"disabled":true,"reason":"restart test"}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	d.stop(t)

	d = startDaemon(t, args...)
	testkit.For(t, "the records to be recovered", func() bool { code, _ := d.do(t, "GET", path, ""); return code == 200 })
	testkit.For(t, "the registration to settle", func() bool {
		return strings.Contains(d.logs.String(), "worker already registered") || strings.Contains(d.logs.String(), "kept the registered worker")
	})
	_, body := d.do(t, "GET", path, "")
	if err := json.Unmarshal([]byte(body), &rec); err != nil || !rec.Disabled || rec.DisabledReason != "restart test" || rec.Owner != "gw-1" {
		t.Fatalf("after restart: %s", body)
	}
	info, err := os.Stat(filepath.Join(stateDir, "gw-1"))
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("node folder: %v %v", info, err)
	}
	if info, err := os.Stat(filepath.Join(stateDir, "gw-1", "raft.db")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("raft.db: %v %v", info, err)
	}
}

// TestEphemeralWarns: --ephemeral writes nothing to disk and says so at start.
func TestEphemeralWarns(t *testing.T) {
	d := startDaemon(t, "--ephemeral")
	if !strings.Contains(d.logs.String(), `level=WARN msg="raft runs in memory (--ephemeral)`) {
		t.Errorf("no warning:\n%s", d.logs.String())
	}
	if code, body := d.do(t, "GET", "/mesh/raft", ""); code != 200 || !strings.Contains(body, `"suffrage":"voter"`) {
		t.Errorf("/mesh/raft: %d %s", code, body)
	}
}
