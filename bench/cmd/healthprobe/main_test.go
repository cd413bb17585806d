package main

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/meshgw/meshgw/bench/engine"
)

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"no urls", nil},
		{"no workers", []string{"--urls", "http://127.0.0.1:1", "--workers", "0"}},
		{"zero interval", []string{"--urls", "http://127.0.0.1:1", "--interval-secs", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code := run(context.Background(), tt.args, io.Discard, io.Discard); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
		})
	}
}

// TestMeasureProbesEveryWorker checks 20 workers on 2 engines (10 dp ranks each) all turn
// ready and are probed about once per interval during the window.
func TestMeasureProbesEveryWorker(t *testing.T) {
	var urls []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := engine.NewServer(engine.Config{})
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Shutdown() })
		urls = append(urls, "http://"+ln.Addr().String())
	}
	r, err := measure(context.Background(), urls, 20, 1, 1500*time.Millisecond, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if r.Workers != 20 || r.Hosts != 2 || r.ReadyWorkers != 20 || r.Failed != 0 {
		t.Errorf("result %+v; want 20 workers on 2 hosts, all ready, none failed", r)
	}
	// 2 s at one probe per worker per second: 40 probes, give or take a turn per worker.
	if r.Probes < 20 || r.Probes > 60 || r.RSSMiB <= 0 {
		t.Errorf("probes %d, RSS %.1f MiB; want 20-60 probes and a resident size", r.Probes, r.RSSMiB)
	}
}
