package main

import (
	"math"
	"strings"
	"testing"
)

// A worker URL refused on the command line is named without its user info or query.
func TestRefusedWorkerURLNotEchoed(t *testing.T) {
	for _, u := range []string{"http://h:1?key=zzsecretzz", "http://user:zzsecretzz@h:1", "h:1?key=zzsecretzz"} {
		_, err := parse([]string{"--worker-urls", u}, nil)
		if err == nil || !strings.Contains(err.Error(), "--worker-urls") || strings.Contains(err.Error(), "zzsecretzz") {
			t.Errorf("--worker-urls %s: %v", u, err)
		}
	}
}

func TestBodyBudget(t *testing.T) {
	tests := []struct {
		name        string
		mb          int
		memoryLimit int64
		want        int64
	}{
		{"auto, no memory limit", 0, math.MaxInt64, 1 << 30},
		{"auto, memory limit unknown", 0, 0, 1 << 30},
		{"auto, a large memory limit does not raise it", 0, 64 << 30, 1 << 30},
		{"auto, half a smaller memory limit", 0, 1 << 30, 512 << 20},
		{"auto, never below 16 MiB", 0, 8 << 20, 16 << 20},
		{"given, whatever the limit", 3000, 1 << 30, 3000 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bodyBudget(tt.mb, tt.memoryLimit); got != tt.want {
				t.Errorf("bodyBudget(%d, %d) = %d, want %d", tt.mb, tt.memoryLimit, got, tt.want)
			}
		})
	}
}

func TestMaxBufferedBodyFlag(t *testing.T) {
	o, err := parse([]string{"--max-buffered-body-mb", "64"}, nil)
	if err != nil || o.gw.config(&o.retry).MaxBufferedBody != 64<<20 {
		t.Fatalf("--max-buffered-body-mb 64: %v", err)
	}
	if o, err = parse(nil, map[string]string{"MESHGW_MAX_BUFFERED_BODY_MB": "128"}); err != nil || o.gw.maxBufferedMB != 128 {
		t.Fatalf("$MESHGW_MAX_BUFFERED_BODY_MB: %v", err)
	}
	for _, bad := range []string{"-1", "9223372036854775807"} {
		if _, err := parse([]string{"--max-buffered-body-mb", bad}, nil); err == nil || !strings.Contains(err.Error(), "--max-buffered-body-mb "+bad) {
			t.Errorf("--max-buffered-body-mb %s: %v", bad, err)
		}
	}
}

// --node-id and --region go into every record, bulletin, raft server id and log line, and a
// worker registered without a region takes the gateway's: they are bounded as the admin API
// bounds a worker's owner (128 bytes) and region (63), and hold no control character.
func TestNodeIDAndRegionBounds(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // "" for accepted
	}{
		{[]string{"--node-id", strings.Repeat("n", 128), "--region", strings.Repeat("r", 63)}, ""},
		{[]string{"--node-id", strings.Repeat("n", 129)}, "--node-id is longer than 128 bytes"},
		{[]string{"--region", strings.Repeat("r", 64)}, "--region is longer than 63 bytes"},
		{[]string{"--node-id", "gw\n1"}, "--node-id holds a control character"},
		{[]string{"--region", "eu\x00"}, "--region holds a control character"},
		{[]string{"--node-id", "gw-\xff"}, "--node-id is not valid UTF-8"},
	} {
		_, err := parse(tt.args, nil)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v, want accepted", tt.args, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%q: %v, want %q", tt.args, err, tt.want)
		}
	}
}
