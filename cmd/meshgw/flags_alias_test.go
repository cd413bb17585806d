package main

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestAliasesThroughTheEnvironment: the names of one setting contradict each other through
// their variables as they do on the command line (exit 2 naming both variables), and a flag
// given under any name wins over every name's variable.
func TestAliasesThroughTheEnvironment(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string // the whole error; "" for success
		check   func(t *testing.T, o *options)
	}{
		{"threshold variables that contradict", nil, map[string]string{"MESHGW_CACHE_THRESHOLD": "0.1", "MESHGW_CACHE_MATCH_THRESHOLD": "0.9"},
			"$MESHGW_CACHE_THRESHOLD=0.1 and $MESHGW_CACHE_MATCH_THRESHOLD=0.9 contradict each other (one is an alias of the other); give one of them", nil},
		{"interval variables that contradict", nil, map[string]string{"MESHGW_EVICTION_INTERVAL": "10", "MESHGW_EVICTION_INTERVAL_SECS": "20"},
			"$MESHGW_EVICTION_INTERVAL=10 and $MESHGW_EVICTION_INTERVAL_SECS=20 contradict each other (one is an alias of the other); give one of them", nil},
		{"switch variables that contradict", nil, map[string]string{"MESHGW_WORKER_AUTO_RECOVERY": "false", "MESHGW_REMOVE_UNHEALTHY_WORKERS": "true"},
			"$MESHGW_REMOVE_UNHEALTHY_WORKERS=true and $MESHGW_WORKER_AUTO_RECOVERY=false contradict each other (one is an alias of the other); give one of them", nil},
		{"variables that agree", nil, map[string]string{"MESHGW_CACHE_THRESHOLD": "0.5", "MESHGW_CACHE_MATCH_THRESHOLD": "0.50",
			"MESHGW_WORKER_AUTO_RECOVERY": "1", "MESHGW_REMOVE_UNHEALTHY_WORKERS": "true"}, "", func(t *testing.T, o *options) {
			if o.cache.threshold != 0.5 || !o.health.cfg.RemoveUnhealthyWorkers {
				t.Errorf("threshold %v, remove %v", o.cache.threshold, o.health.cfg.RemoveUnhealthyWorkers)
			}
		}},
		{"a flag wins over both variables", []string{"--cache-match-threshold", "0.4"},
			map[string]string{"MESHGW_CACHE_THRESHOLD": "0.1", "MESHGW_CACHE_MATCH_THRESHOLD": "0.9"}, "", func(t *testing.T, o *options) {
				if o.cache.threshold != 0.4 {
					t.Errorf("threshold %v", o.cache.threshold)
				}
			}},
		{"a switch flag wins over both variables", []string{"--worker-auto-recovery=false"},
			map[string]string{"MESHGW_WORKER_AUTO_RECOVERY": "true", "MESHGW_REMOVE_UNHEALTHY_WORKERS": "true"}, "", func(t *testing.T, o *options) {
				if o.health.cfg.RemoveUnhealthyWorkers {
					t.Error("on")
				}
			}},
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
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("error %v\nwant %s", err, tt.wantErr)
			}
		})
	}
	// The whole command exits 2; were the contradiction taken, it would exit 1 (the port is taken).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var stdout, stderr bytes.Buffer
	code := run([]string{"--host", "127.0.0.1", "--port", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "--ephemeral"}, env(map[string]string{"MESHGW_CACHE_THRESHOLD": "0.1", "MESHGW_CACHE_MATCH_THRESHOLD": "0.9"}), &stdout, &stderr)
	if code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "contradict") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestErrorsNameTheFlagGiven: an error about a value names the flag it was given under (an
// alias, when it was) and the variable it came from, if it did.
func TestErrorsNameTheFlagGiven(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string // the whole error
	}{
		{"the threshold's alias", []string{"--cache-match-threshold", "2"}, nil, "--cache-match-threshold 2 is not in 0-1"},
		{"the threshold's own name", []string{"--cache-threshold", "2"}, nil, "--cache-threshold 2 is not in 0-1"},
		{"the interval's alias", []string{"--eviction-interval-secs", "-1"}, nil, "--eviction-interval-secs -1 is below the minimum 0"},
		{"the alias's variable", nil, map[string]string{"MESHGW_CACHE_MATCH_THRESHOLD": "2"},
			"$MESHGW_CACHE_MATCH_THRESHOLD: --cache-match-threshold 2 is not in 0-1"},
		{"the interval alias's variable", nil, map[string]string{"MESHGW_EVICTION_INTERVAL_SECS": "-1"},
			"$MESHGW_EVICTION_INTERVAL_SECS: --eviction-interval-secs -1 is below the minimum 0"},
		{"a plain flag's variable", nil, map[string]string{"MESHGW_PORT": "70000"}, "$MESHGW_PORT: --port 70000 is not a port; want 0-65535"},
		{"a variable out of range", nil, map[string]string{"MESHGW_RETRY_JITTER_FACTOR": "2"}, "$MESHGW_RETRY_JITTER_FACTOR: --retry-jitter-factor 2 is not in 0-1"},
		{"a variable not one of", nil, map[string]string{"MESHGW_CACHE_RULE": "dynamo"}, `$MESHGW_CACHE_RULE: --cache-rule "dynamo" is not one of cost, smg`},
		{"a flag beside a variable", []string{"--port", "70000"}, map[string]string{"MESHGW_PORT": "1"}, "--port 70000 is not a port; want 0-65535"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(tt.args, tt.env)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %v\nwant %s", err, tt.want)
			}
		})
	}
}
