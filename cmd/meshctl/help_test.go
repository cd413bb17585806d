package main

import (
	"strings"
	"testing"
)

// TestHelpMatchesTheCode: help texts say what the code and the gateway do (docs/admin-api.md):
// each must say the phrases listed and none of the outdated ones.
func TestHelpMatchesTheCode(t *testing.T) {
	tests := []struct {
		args      []string
		says, not []string
	}{
		{[]string{"owners"},
			[]string{
				"BREAKER is the circuit breaker's state (closed, open, half_open): the answering gateway's own for a worker it owns, the owner's, from its bulletins, for the others",
				"unknown before the owner's first bulletin",
				"STALE is true when the state imported from the owner's bulletins was not refreshed for 3 × the worker's probe interval",
				"always false for a worker the answering gateway owns",
				"default: by URL, then worker",
			},
			[]string{"always false until owners publish", "does not own. FLAGS", "by name, then URL"}},
		{[]string{"peers"}, []string{"default: by name, then address"}, []string{"by name, then URL"}},
		{[]string{"workers", "list"}, []string{"default: by name, then URL"}, nil},
		// POST /mesh/drain {"color"} drains the alive and the suspect gateways of the color.
		{[]string{"drain"}, []string{"every alive or suspect gateway whose --color is COLOR",
			"drain every alive or suspect gateway of this --color"}, []string{"every alive gateway whose", "drain every alive gateway of"}},
		// ownership.PlanRebalance leaves suspect and just-joined gateways' and host-local workers.
		{[]string{"rebalance"}, []string{"suspect or only just joined (they keep theirs until they settle)",
			"host-local workers (ipc://) never move", "-o wide adds each move's EPOCH"}, nil},
		// DELETE /workers/{id} drains only a ready worker that is not quarantined, with a settle time.
		{[]string{"workers", "remove"}, []string{"A ready worker that is not quarantined and has a drain settle time above 0 (health.drain_settle_secs, else the gateway's --drain-settle-secs) is drained first"}, nil},
		// /readiness answers 503 "no quorum" with --readiness-requires-quorum.
		{[]string{"probe"}, []string{"and, with --readiness-requires-quorum, raft has a leader"}, nil},
		// worker.Spec.Normalize: the mode defaults from the URL's scheme, the provider to openai_compatible.
		{[]string{"workers", "add"}, []string{"http, grpc, zmq or external (default: from the URL's scheme: grpc:// grpc, ipc:// and tcp:// zmq, else http)",
			"(default openai_compatible)"}, []string{"http (default)"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "http://127.0.0.1:1", nil, append(tt.args, "--help")...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			text := oneLine(stdout) // phrases may wrap
			for _, s := range tt.says {
				if !strings.Contains(text, s) {
					t.Errorf("help lacks %q", s)
				}
			}
			for _, s := range tt.not {
				if strings.Contains(text, s) {
					t.Errorf("help still says %q", s)
				}
			}
			if t.Failed() {
				t.Logf("meshctl %s --help:\n%s", strings.Join(tt.args, " "), stdout)
			}
		})
	}
}
