package gateway

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/fakeengine"
	"github.com/meshgw/meshgw/worker"
	"github.com/meshgw/meshgw/zmqlink"
)

// startZMQEngine serves a fake engine over ZMQ on loopback; it returns the engine and its URL.
func startZMQEngine(t *testing.T) (*fakeengine.Engine, string) {
	t.Helper()
	fe := fakeengine.New(fakeengine.Config{Logger: slog.New(slog.DiscardHandler)})
	url, err := fe.StartZMQ("tcp://127.0.0.1:0", fakeengine.ZMQOptions{HeartbeatInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fe.Close() })
	return fe, url
}

// A ZMQ worker's local check waits out the first handshake; requests then go over the link,
// streamed or not, and removing the worker closes the link.
func TestZMQWorker(t *testing.T) {
	e := newEnv(t, Config{})
	fe, url := startZMQEngine(t)
	w := e.add(worker.Spec{URL: url})
	up := upstreamOf(w)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := up.Check(ctx); err != nil {
		t.Fatalf("the first check did not wait for the handshake: %v", err)
	}
	code, hdr, body := e.post("/v1/chat/completions", `{"model":"fake-model","messages":[{"role":"user","content":"hello zmq"}]}`)
	if code != 200 || hdr.Get("X-Mesh-Worker") != string(w.ID) || !strings.Contains(body, "hello zmq") {
		t.Fatalf("chat %d %v %s", code, hdr, body)
	}
	code, hdr, body = e.post("/v1/chat/completions", `{"model":"fake-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if code != 200 || hdr.Get("Content-Type") != "text/event-stream" || !strings.HasSuffix(body, "data: [DONE]\n\n") || strings.Count(body, "data: ") < 3 {
		t.Fatalf("stream %d %v %q", code, hdr, body)
	}
	if got := fe.Stats().ByGateway["gw-test"].Requests; got != 2 {
		t.Errorf("engine counted %d requests from gw-test, want 2", got)
	}
	if got := e.outcomesCopy(); len(got) != 2 || got[0] != (outcome{w.ID, 200, false}) {
		t.Errorf("outcomes %v", got)
	}
	if err := e.gw.Pool().Remove(w.ID); err != nil {
		t.Fatal(err)
	}
	if err := up.Check(ctx); !errors.Is(err, zmqlink.ErrClosed) {
		t.Errorf("check after removal: %v, want the link closed", err)
	}
}

// An engine's error status in the first chunk is the answer's, and the worker's outcome.
func TestZMQWorkerErrorStatus(t *testing.T) {
	e := newEnv(t, Config{Retry: RetryConfig{Disabled: true}})
	fe, url := startZMQEngine(t)
	w := e.add(worker.Spec{URL: url})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := upstreamOf(w).Check(ctx); err != nil {
		t.Fatal(err)
	}
	f := fe.Faults()
	f.ErrorStatus = 503
	if err := fe.SetFaults(f); err != nil {
		t.Fatal(err)
	}
	if code, _, body := e.post("/v1/chat/completions", `{"messages":[]}`); code != 503 {
		t.Fatalf("answer %d %s, want the engine's 503", code, body)
	}
	if got := e.outcomesCopy(); len(got) != 1 || got[0] != (outcome{w.ID, 503, false}) {
		t.Errorf("outcomes %v", got)
	}
}

// Only ZMQ workers have a local check.
func TestLocalCheckOnlyForZMQ(t *testing.T) {
	e := newEnv(t, Config{})
	w := e.add(worker.Spec{URL: "http://127.0.0.1:9"})
	if err := upstreamOf(w).Check(context.Background()); !errors.Is(err, errNoLocalCheck) {
		t.Errorf("Check of an HTTP worker: %v", err)
	}
}
