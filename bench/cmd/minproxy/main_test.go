package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/bench"
	"github.com/meshgw/meshgw/bench/engine"
)

// TestProxiesCompletionsAndStreams runs minproxy in front of an in-process engine: plain
// answers come back whole, and streams arrive complete with [DONE].
func TestProxiesCompletionsAndStreams(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := engine.NewServer(engine.Config{Events: 5})
	go func() { _ = srv.Serve(ln) }()
	defer srv.Shutdown()

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"--upstreams", ln.Addr().String()}, pw, io.Discard); pw.Close() }()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatal("minproxy printed no URL")
	}
	f := strings.Fields(sc.Text())
	base := f[len(f)-1]
	go func() { _, _ = io.Copy(io.Discard, pr) }()

	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(bench.ChatBody))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	client.CloseIdleConnections()
	if resp.StatusCode != 200 || !strings.Contains(string(b), engine.CompletionMarker) {
		t.Errorf("plain answer %d %q", resp.StatusCode, b)
	}
	r := bench.RunStreams(ctx, bench.StreamOptions{URL: base + "/v1/chat/completions", Streams: 2, MaxStreams: 10,
		Duration: 5 * time.Second, Events: 5})
	if r.Completed != 10 || r.Cut != 0 || r.WrongEvents != 0 {
		t.Errorf("streams through minproxy: %+v; want 10 complete", r)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

func TestRunNeedsUpstreams(t *testing.T) {
	if code := run(context.Background(), nil, io.Discard, io.Discard); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
}
