package main

import (
	"bytes"
	"io"
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

func TestRuntimeFlagsApply(t *testing.T) {
	const before, beforeLimit = 123, int64(3 << 30) // what $GOGC and $GOMEMLIMIT would have set
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		wantGC    int64
		wantLimit int64
	}{
		{"not given: the runtime's own stay", nil, nil, before, beforeLimit},
		{"flags", []string{"--gc-percent", "400", "--memory-limit-mb", "512"}, nil, 400, 512 << 20},
		{"env", nil, map[string]string{"MESHGW_GC_PERCENT": "250", "MESHGW_MEMORY_LIMIT_MB": "64"}, 250, 64 << 20},
		{"limit 0 is none", []string{"--memory-limit-mb", "0"}, nil, before, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oldGC, oldLimit := debug.SetGCPercent(before), debug.SetMemoryLimit(beforeLimit)
			t.Cleanup(func() { debug.SetGCPercent(oldGC); debug.SetMemoryLimit(oldLimit) })
			o, err := parse(tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			gc, limit := o.runtime.apply()
			if gc != tt.wantGC || limit != tt.wantLimit {
				t.Errorf("apply = %d, %d; want %d, %d", gc, limit, tt.wantGC, tt.wantLimit)
			}
			if got := debug.SetGCPercent(before); int64(got) != tt.wantGC {
				t.Errorf("the runtime's GC percent is %d, want %d", got, tt.wantGC)
			}
		})
	}
}

func TestBadRuntimeFlagsExitTwo(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--gc-percent", "0"}, "--gc-percent 0 is below the minimum 1"},
		{[]string{"--memory-limit-mb", "-1"}, "--memory-limit-mb -1 is below the minimum 0"},
		{[]string{"--memory-limit-mb", "99999999999999999"}, "--memory-limit-mb 99999999999999999 is above the maximum"},
		{[]string{"--enable-pprof=maybe"}, "enable-pprof"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(tt.args, env(nil), io.Discard, &stderr)
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and one line with %q", code, stderr.String(), tt.want)
			}
		})
	}
}
