package main

import (
	"io"
	"testing"
	"time"
)

func TestParseFlagsQuick(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		env          string
		wantRounds   int
		wantDuration time.Duration
		wantHealth   bool
	}{
		{name: "full run leaves defaults to bench.Run", wantRounds: 0, wantDuration: 0, wantHealth: true},
		{name: "-quick", args: []string{"-quick"}, wantRounds: 1, wantDuration: 3 * time.Second, wantHealth: true},
		{name: "BENCH_QUICK=1", env: "1", wantRounds: 1, wantDuration: 3 * time.Second, wantHealth: true},
		{name: "quick keeps what is set", args: []string{"-quick", "-rounds", "2", "-duration", "5s"}, wantRounds: 2,
			wantDuration: 5 * time.Second, wantHealth: true},
		{name: "health off", args: []string{"-health=false"}, wantHealth: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("BENCH_QUICK", tt.env)
			t.Setenv("REPORT", "/tmp/x.json")
			o, report, err := parseFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if o.Rounds != tt.wantRounds || o.Duration != tt.wantDuration || (o.Health != nil) != tt.wantHealth || report != "/tmp/x.json" {
				t.Errorf("rounds %d, duration %v, health %v, report %q", o.Rounds, o.Duration, o.Health != nil, report)
			}
		})
	}
	t.Setenv("BENCH_QUICK", "")
	o, _, err := parseFlags([]string{"-quick"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if m := o.Mesh; m == nil || len(m.BulletinPeers) != 1 || m.BulletinPeers[0] != 3 || m.BulletinTrials != 20 || m.BulletinWorkers != 1_000 {
		t.Errorf("quick mesh options %+v: want bulletins at 3 peers only, 20 trials, 1,000 workers", o.Mesh)
	}
	if _, _, err := parseFlags([]string{"-nope"}, io.Discard); err == nil {
		t.Error("unknown flag accepted")
	}
}
