package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"non-loopback host", []string{"--host", "0.0.0.0"}},
		{"no listeners", []string{"--listeners", "0"}},
		{"negative delay", []string{"--event-delay", "-1s"}},
		{"unknown flag", []string{"--nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code := run(context.Background(), tt.args, io.Discard, io.Discard); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
		})
	}
}

// TestRunServesEachListenerUntilCanceled starts two listeners, checks each answers, and stops.
func TestRunServesEachListenerUntilCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"--listeners", "2"}, pw, io.Discard); pw.Close() }()
	sc := bufio.NewScanner(pr)
	var urls []string
	for len(urls) < 2 && sc.Scan() {
		f := strings.Fields(sc.Text())
		urls = append(urls, f[len(f)-1])
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	client := &http.Client{Timeout: 5 * time.Second}
	for _, u := range urls {
		resp, err := client.Get(u + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s/health: %d", u, resp.StatusCode)
		}
	}
	client.CloseIdleConnections()
	cancel()
	select {
	case code := <-done:
		if code != 0 || len(urls) != 2 {
			t.Errorf("exit %d after %d URLs; want 0 after 2", code, len(urls))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}
