package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/testkit"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func parse(args []string, e map[string]string) (*options, error) {
	var o options
	fs := newFlagSet(o.groups())
	return &o, parseFlags(fs, o.groups(), args, env(e))
}

func TestParseFlags(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "workers.json")
	if err := os.WriteFile(good, []byte(`[{"url":"http://127.0.0.1:9001","models":["m"],"api_key":"sk-x"},{"url":"grpc://10.0.0.1:50051"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"url":"http://127.0.0.1:9001"},{"url":"http://h:1","priority":5000}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string // substring of the one-line error; "" for success
		check   func(t *testing.T, o *options)
	}{
		{"defaults", nil, nil, "", func(t *testing.T, o *options) {
			if o.gw.port != 30000 || o.gw.host != "0.0.0.0" || o.gw.policy != "cache_aware" || o.retry.maxRetries != 5 ||
				o.observe.prometheusPort != 29000 || o.gw.shutdownGrace != 180 || o.gw.requestTimeout != 1800 || o.gw.maxPayloadSize != 512<<20 {
				t.Errorf("defaults %+v %+v %+v", o.gw, o.retry, o.observe)
			}
		}},
		{"worker urls repeatable and comma separated", []string{"--worker-urls", "http://a:1,http://b:2", "--worker-urls=http://C:3/"}, nil, "", func(t *testing.T, o *options) {
			if len(o.gw.specs) != 3 || o.gw.specs[2].URL != "http://c:3" {
				t.Errorf("specs %+v", o.gw.specs)
			}
		}},
		{"env fills", nil, map[string]string{"MESHGW_POLICY": "random", "MESHGW_WORKER_URLS": "http://a:1,http://b:2", "MESHGW_DISABLE_RETRIES": "true"}, "", func(t *testing.T, o *options) {
			if o.gw.policy != "random" || len(o.gw.specs) != 2 || !o.retry.disabled {
				t.Errorf("env not applied: %s %d %v", o.gw.policy, len(o.gw.specs), o.retry.disabled)
			}
		}},
		{"flag wins over env", []string{"--policy", "least_request"}, map[string]string{"MESHGW_POLICY": "random"}, "", func(t *testing.T, o *options) {
			if o.gw.policy != "least_request" {
				t.Errorf("policy %s", o.gw.policy)
			}
		}},
		{"worker config", []string{"--worker-config", good}, nil, "", func(t *testing.T, o *options) {
			if len(o.gw.specs) != 2 || o.gw.specs[0].APIKey != "sk-x" || o.gw.specs[1].ConnectionMode != "grpc" {
				t.Errorf("specs %+v", o.gw.specs)
			}
		}},
		{"bad policy", []string{"--policy", "fastest"}, nil, `--policy "fastest" is not one of cache_aware, round_robin, random, least_request, power_of_two, consistent_hashing, prefix_hash`, nil},
		{"bad env value", nil, map[string]string{"MESHGW_PORT": "abc"}, `$MESHGW_PORT: --port "abc" is not a whole number`, nil},
		{"worker url with a path", []string{"--worker-urls", "http://h:1/v1"}, nil, `--worker-urls "http://h:1/v1"`, nil},
		{"worker config entry", []string{"--worker-config", bad}, nil, "entry 1: priority", nil},
		{"worker config missing", []string{"--worker-config", filepath.Join(dir, "none.json")}, nil, "--worker-config", nil},
		{"bad port", []string{"--port", "70000"}, nil, "--port 70000 is not a port", nil},
		{"bad jitter", []string{"--retry-jitter-factor", "2"}, nil, "--retry-jitter-factor 2 is not in 0-1", nil},
		{"bad log level", []string{"--log-level", "loud"}, nil, `--log-level "loud" is not one of debug, info, warn (or warning), error (or critical)`, nil},
		{"unknown flag", []string{"--nope"}, nil, "unknown flag: --nope", nil},
		{"stray argument", []string{"serve"}, nil, `unexpected argument "serve"`, nil},
		{"zero retries", []string{"--retry-max-retries", "0"}, nil, "--retry-max-retries 0 is below the minimum 1", nil},
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
	if _, err := parse([]string{"--help"}, nil); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
}

func TestRunBadFlagExitsTwoWithOneLine(t *testing.T) {
	for _, args := range [][]string{{"--policy", "fastest"}, {"--worker-urls", "http://127.0.0.1:9000/v1"}} {
		var stdout, stderr bytes.Buffer
		code := run(args, env(nil), &stdout, &stderr)
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		if code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], "meshgw: --") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}

func TestHelpListsEveryFlagWithDefaultAndEnv(t *testing.T) {
	var stdout bytes.Buffer
	if code := run([]string{"--help"}, env(nil), &stdout, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var o options
	newFlagSet(o.groups()).VisitAll(func(f *pflag.Flag) {
		if !strings.Contains(stdout.String(), "--"+f.Name) || (!noEnv[f.Name] && !strings.Contains(stdout.String(), "$"+envName(f.Name))) {
			t.Errorf("help lacks --%s or its variable", f.Name)
		}
	})
	if !strings.Contains(stdout.String(), `(default 30000)`) {
		t.Error("help lacks defaults")
	}
}

type syncBuffer = logbuf.Buffer

func TestRunServesAndStopsCleanly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	done := make(chan int, 1)
	args := []string{"--host", "127.0.0.1", "--port", "0", "--prometheus-host", "127.0.0.1", "--prometheus-port", strconv.Itoa(metricsPort),
		"--worker-urls", "http://127.0.0.1:1", "--shutdown-settle-secs", "0", "--admin-api-key", "sk-admin-secret", "--disable-health-check",
		"--ephemeral", "--raft-port", "0", "--mesh-port", "0", "--rpc-port", "0"}
	go func() { done <- runContext(ctx, args, env(nil), io.Discard, &logs) }()
	listen := regexp.MustCompile(`msg="meshgw started" listen=(\S+)`)
	var m []string
	testkit.For(t, "the start line", func() bool { m = listen.FindStringSubmatch(logs.String()); return m != nil })
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The worker is registered through raft in the background, once the node leads.
	testkit.For(t, "readiness with the one worker", func() bool {
		code, body := get("http://" + m[1] + "/readiness")
		return code == 200 && strings.Contains(body, `"total_workers":1`)
	})
	if code, body := get("http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"); code != 200 || !strings.Contains(body, "meshgw_admission_inflight") ||
		!strings.Contains(body, "meshgw_request_log_dropped_total 0") {
		t.Errorf("metrics %d", code)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon did not stop")
	}
	if strings.Contains(logs.String(), "sk-admin-secret") {
		t.Error("a secret reached the logs")
	}
	http.DefaultClient.CloseIdleConnections()
}
