package main

import (
	"bytes"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
)

// TestOneLineErrors: meshctl's own flags are not named twice (no "meshctl: meshctl:"), a value
// of the wrong type says what the flag takes, and a --sort column the table lacks is refused
// before the gateway is asked.
func TestOneLineErrors(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"--nope"}, "meshctl: unknown flag: --nope (see meshctl --help)\n"},
		{[]string{"--timeout", "abc", "peers"}, `meshctl: peers: --timeout "abc" is not a duration such as 15s or 1m (see meshctl peers --help)` + "\n"},
		{[]string{"peers", "--sort", "nope"}, `meshctl: peers: --sort "nope" is not a column; want one of name, address, status, raft, region, color, version, owned, applied, lag` + "\n"},
		{[]string{"workers", "list", "--sort", "nope"}, `meshctl: workers list: --sort "nope" is not a column; want one of worker, id, health, breaker, flags, owner, routable, models, cache_hit, predicted, url, epoch, last_error, prompt_tokens, cached_tokens, routed_bytes, predicted_bytes` + "\n"},
		{[]string{"owners", "--sort", "nope"}, `meshctl: owners: --sort "nope" is not a column; want one of worker, url, owner, epoch, health, breaker, flags, stale, cache_hit, region, origin` + "\n"},
		{[]string{"completion", "ksh"}, `meshctl: completion: invalid argument "ksh" for "meshctl completion" (usage: meshctl completion bash|zsh|fish [flags])` + "\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f, srv := newFake(t)
			code, stdout, stderr := runCLI(t, srv.URL, nil, tt.args...)
			if code != exitUsage || stderr != tt.stderr || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr\n%q\nwant\n%q", code, stdout, stderr, tt.stderr)
			}
			if len(f.calls) != 0 {
				t.Errorf("asked the gateway: %v", f.calls)
			}
		})
	}
}

// TestVersion: --version prints one line with the version, commit and Go version, and asks no
// gateway.
func TestVersion(t *testing.T) {
	code, stdout, stderr := runCLI(t, "http://127.0.0.1:1", nil, "--version")
	if code != 0 || !strings.HasPrefix(stdout, "meshctl dev (commit ") || !strings.Contains(stdout, ", go1.") ||
		strings.Count(stdout, "\n") != 1 || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestCompletion: meshctl completion prints each shell's script, without a gateway (even a bad
// $MESHCTL_GATEWAY); bash loads the script and registers the completion.
func TestCompletion(t *testing.T) {
	for shell, head := range map[string]string{"bash": "# bash completion V2 for meshctl", "zsh": "#compdef meshctl",
		"fish": "# fish completion for meshctl"} {
		code, stdout, stderr := runCLI(t, "ftp://not-a-gateway", nil, "completion", shell)
		if code != 0 || !strings.HasPrefix(stdout, head) || stderr != "" {
			t.Errorf("%s: exit %d, stderr %q, script starts %q", shell, code, stderr, stdout[:min(len(stdout), 60)])
		}
		if shell != "bash" {
			continue
		}
		bash, err := exec.LookPath("bash")
		if err != nil {
			t.Skip("no bash")
		}
		cmd := exec.Command(bash, "--norc", "-c", `source /dev/stdin && complete -p meshctl`)
		cmd.Stdin = strings.NewReader(stdout)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "__start_meshctl meshctl") {
			t.Errorf("bash cannot load the script: %v: %s", err, out.String())
		}
	}
}

// describedRecord is a full record: the breaker, a last error, transitions, overrides, and a
// field meshctl does not know.
const describedRecord = `{"id": "w-3f1c0a9b2d44", "worker_id": "http%3A%2F%2F127.0.0.1%3A8013", "display_id": "127.0.0.1:8013",
 "url": "http://127.0.0.1:8013", "connection_mode": "http", "owner": "gw-1", "epoch": 5, "origin": "local",
 "health_state": "not_ready", "disabled": true, "disabled_reason": "maintenance", "disabled_by": "127.0.0.1",
 "disabled_at": "2025-05-01T12:00:00Z", "is_dead": false, "routable": false, "stale": false, "active_requests": 2,
 "registered_at": "2025-05-01T11:00:00Z", "revision": 9, "models": ["llama-3"], "capabilities": ["chat", "streaming"],
 "priority": 50, "cost": 1, "labels": {"tier": "gold"}, "region": "eu", "has_api_key": true,
 "health": {"timeout_secs": 3}, "resilience": {"max_retries": 2},
 "consecutive_failures": 3, "consecutive_successes": 0, "last_error": "status 503", "last_status_code": 503,
 "last_health_check": "2025-05-01T12:01:00Z",
 "breaker": {"state": "open", "consecutive_failures": 10, "consecutive_successes": 0, "opened_at": "2025-05-01T12:00:30Z"},
 "transitions": [{"at": "2025-05-01T11:00:01Z", "kind": "health", "from": "pending", "to": "ready"},
  {"at": "2025-05-01T12:00:30Z", "kind": "breaker", "from": "closed", "to": "open"}],
 "future_field": {"a": 1}}`

// TestWorkersGetDescribes: workers get reads like kubectl describe, and shows every field.
func TestWorkersGetDescribes(t *testing.T) {
	f := &fakeAdmin{answers: map[string]canned{"GET /workers/w-3f1c0a9b2d44": {200, describedRecord}}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	code, stdout, stderr := runCLI(t, srv.URL, nil, "workers", "get", "w-3f1c0a9b2d44")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"Name:            127.0.0.1:8013\n",
		"Worker ID:       http%3A%2F%2F127.0.0.1%3A8013\n",
		"Owner:           gw-1 (epoch 5, local)\n",
		"Health:          not_ready\n",
		"Disabled:        true (maintenance, by 127.0.0.1, at 2025-05-01T12:00:00Z)\n",
		"Labels:          tier=gold\n",
		"API key:         set (never shown)\n",
		"Probes:          3 consecutive failures, 0 successes; last at 2025-05-01T12:01:00Z\n",
		"Last error:      status 503 (status 503)\n",
		"Breaker:\n  consecutive_failures:  10\n",
		"  state:                 open\n",
		"Health overrides:\n  timeout_secs: 3\n",
		"Transitions:\n  AT                   KIND    FROM    TO\n  2025-05-01T11:00:01Z health  pending ready\n  2025-05-01T12:00:30Z breaker closed  open\n",
		"Other fields:\n  future_field.a: 1\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("lacks %q in:\n%s", want, stdout)
		}
	}
}
