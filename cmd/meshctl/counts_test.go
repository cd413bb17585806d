package main

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCountsAgree: every count meshctl prints agrees with its noun: 1 move, 2 moves.
func TestCountsAgree(t *testing.T) {
	oneMove := `{"dry_run": true, "moves": [{"worker": "w-3f1c0a9b2d44", "url": "http://127.0.0.1:8013", "from": "gw-1", "epoch": 5, "to": "gw-4"}],
 "moved": 0, "skipped": [], "owners": {"gw-1": 2, "gw-4": 1}}`
	twoMoves := `{"dry_run": true, "moves": [{"worker": "w-3f1c0a9b2d44", "url": "http://127.0.0.1:8013", "from": "gw-1", "epoch": 5, "to": "gw-4"},
 {"worker": "w-00aa11bb22cc", "url": "http://10.0.0.9:9000", "from": "gw-2", "epoch": 7, "to": "gw-5"}],
 "moved": 0, "skipped": [], "owners": {"gw-1": 2, "gw-4": 1}}`
	oneDrained := `{"peers": ["gw-1"], "moved": 1, "stuck": [], "done": true,
 "states": [{"peer": "gw-1", "status": "left", "owned": 0, "stuck": 0, "leader": false, "raft": "", "done": true}]}`
	oneLeft := `{"peers": ["gw-3"], "moved": 1, "stuck": ["w-ipc"], "done": false,
 "states": [{"peer": "gw-3", "status": "alive", "owned": 1, "stuck": 1, "leader": false, "raft": "nonvoter", "done": false}]}`
	oneProbe := `{"id": "w-3f1c0a9b2d44", "consecutive_failures": 1, "consecutive_successes": 1}`
	tests := []struct {
		name   string
		answer string // "METHOD path"
		canned canned
		args   []string
		want   string // in stdout
	}{
		{"one move planned", "POST /mesh/rebalance", canned{200, oneMove}, []string{"rebalance", "--dry-run"},
			"dry run: 1 move planned, nothing moved\n"},
		{"two moves planned", "POST /mesh/rebalance", canned{200, twoMoves}, []string{"rebalance", "--dry-run"},
			"dry run: 2 moves planned, nothing moved\n"},
		{"one worker drained", "POST /mesh/drain", canned{200, oneDrained}, []string{"drain", "gw-1"},
			"drained gw-1: moved 1 worker\n"},
		{"one worker left", "POST /mesh/drain", canned{202, oneLeft}, []string{"drain", "gw-3"},
			"not finished: gw-3: 1 worker (1 host-local), nonvoter, in the mesh; moved 1 worker\n"},
		{"one failure, one success", "GET /workers/w-3f1c0a9b2d44", canned{200, oneProbe}, []string{"workers", "get", "w-3f1c0a9b2d44"},
			"1 consecutive failure, 1 success; last at none\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeAdmin{answers: map[string]canned{tt.answer: tt.canned}}
			srv := httptest.NewServer(f)
			defer srv.Close()
			_, stdout, stderr := runCLI(t, srv.URL, nil, tt.args...)
			if !strings.Contains(stdout, tt.want) {
				t.Errorf("stdout lacks %q:\n%s(stderr %q)", tt.want, stdout, stderr)
			}
		})
	}
}
