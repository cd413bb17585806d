package gateway

import (
	"bufio"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	enginev1 "github.com/meshgw/meshgw/api/engine/v1"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/test/fakeengine"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// scriptedEngine is a meshgw.engine.v1.Engine whose Generate runs the test's function.
type scriptedEngine struct {
	enginev1.UnimplementedEngineServer
	generate func(*enginev1.GenerateRequest, grpc.ServerStreamingServer[enginev1.GenerateChunk]) error
	mu       sync.Mutex
	md       []metadata.MD
	reqs     []*enginev1.GenerateRequest
}

func (s *scriptedEngine) Generate(req *enginev1.GenerateRequest, st grpc.ServerStreamingServer[enginev1.GenerateChunk]) error {
	md, _ := metadata.FromIncomingContext(st.Context())
	s.mu.Lock()
	s.md, s.reqs = append(s.md, md), append(s.reqs, req)
	s.mu.Unlock()
	return s.generate(req, st)
}

func (s *scriptedEngine) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// grpcWorker serves eng on loopback and registers it with e; it returns the pool's worker.
func (e *testEnv) grpcWorker(eng *scriptedEngine, mutate ...func(*worker.Spec)) *pool.Worker {
	e.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	srv := grpc.NewServer()
	enginev1.RegisterEngineServer(srv, eng)
	go func() { _ = srv.Serve(ln) }()
	e.t.Cleanup(srv.Stop)
	spec := worker.Spec{URL: "grpc://" + ln.Addr().String()}
	for _, m := range mutate {
		m(&spec)
	}
	return e.add(spec)
}

func chunk(status int32, ct, data string) *enginev1.GenerateChunk {
	return &enginev1.GenerateChunk{Status: status, ContentType: ct, Data: []byte(data)}
}

// A non-streamed request reaches a gRPC worker as Generate with the original body, route, request
// id, gateway and the worker's key; the chunks make the answer, with the first chunk's status.
func TestGRPCWorkerAnswers(t *testing.T) {
	e := newEnv(t, Config{})
	eng := &scriptedEngine{generate: func(req *enginev1.GenerateRequest, st grpc.ServerStreamingServer[enginev1.GenerateChunk]) error {
		_ = st.Send(chunk(201, "application/json", `{"part":1,`))
		return st.Send(chunk(0, "", `"part":2}`))
	}}
	w := e.grpcWorker(eng, func(s *worker.Spec) { s.APIKey = "sk-grpc-key" })
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	code, hdr, got := e.post("/v1/chat/completions", body, "X-Request-Id", "req-42")
	if code != 201 || got != `{"part":1,"part":2}` || hdr.Get("Content-Type") != "application/json" || hdr.Get("X-Mesh-Worker") != string(w.ID) {
		t.Fatalf("answer %d %v %q", code, hdr, got)
	}
	req, md := eng.reqs[0], eng.md[0]
	if string(req.GetBody()) != body || req.GetRoute() != "/v1/chat/completions" || req.GetStream() || req.GetRequestId() != "req-42" || req.GetGateway() != "gw-test" {
		t.Errorf("request %v", req)
	}
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer sk-grpc-key" {
		t.Errorf("authorization metadata %v", got)
	}
	if got := e.outcomesCopy(); len(got) != 1 || got[0] != (outcome{w.ID, 201, false}) {
		t.Errorf("outcomes %v", got)
	}
}

// A streamed answer is relayed as SSE, one event per chunk, each flushed before the engine
// sends the next.
func TestGRPCWorkerStreamsEventByEvent(t *testing.T) {
	e := newEnv(t, Config{})
	next := make(chan struct{})
	eng := &scriptedEngine{generate: func(_ *enginev1.GenerateRequest, st grpc.ServerStreamingServer[enginev1.GenerateChunk]) error {
		for i, d := range []string{`{"i":1}`, `{"i":2}`, `[DONE]`} {
			c := chunk(0, "", d)
			if i == 0 {
				c = chunk(200, "text/event-stream", d)
			}
			if err := st.Send(c); err != nil {
				return err
			}
			select {
			case <-next:
			case <-st.Context().Done():
				return st.Context().Err()
			}
		}
		return nil
	}}
	e.grpcWorker(eng)
	resp, err := http.Post(e.base+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	for _, want := range []string{`{"i":1}`, `{"i":2}`, `[DONE]`} {
		// The engine sends the next chunk only after the client has read this event.
		if got := readEvent(t, br); got != "data: "+want+"\n\n" {
			t.Fatalf("event %q, want data: %s", got, want)
		}
		next <- struct{}{}
	}
	if rest, _ := br.ReadString(0); rest != "" {
		t.Errorf("trailing bytes %q", rest)
	}
}

// gRPC statuses map to HTTP ones (breaker.HTTPStatusFromGRPC) for the answer and the outcome.
func TestGRPCStatusesMap(t *testing.T) {
	tests := []struct {
		code codes.Code
		want int
	}{
		{codes.ResourceExhausted, 429},
		{codes.Unavailable, 503},
		{codes.DeadlineExceeded, 504},
		{codes.InvalidArgument, 400},
		{codes.Internal, 500},
		{codes.NotFound, 404},
	}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			e := newEnv(t, Config{Retry: RetryConfig{Disabled: true}})
			w := e.grpcWorker(&scriptedEngine{generate: func(*enginev1.GenerateRequest, grpc.ServerStreamingServer[enginev1.GenerateChunk]) error {
				return status.Error(tt.code, "scripted")
			}})
			code, hdr, body := e.post("/v1/chat/completions", `{"messages":[]}`)
			if code != tt.want || hdr.Get("X-Mesh-Worker") != string(w.ID) || !strings.Contains(body, `"code":`) {
				t.Fatalf("answer %d %v %s, want %d", code, hdr, body, tt.want)
			}
			if got := e.outcomesCopy(); len(got) != 1 || got[0] != (outcome{w.ID, tt.want, false}) {
				t.Errorf("outcomes %v", got)
			}
		})
	}
}

// A retryable status (RESOURCE_EXHAUSTED, UNAVAILABLE, a first chunk saying 500) is retried and
// the next attempt answers; INVALID_ARGUMENT is not retried. Retries on one worker report one
// outcome: its last.
func TestGRPCRetries(t *testing.T) {
	tests := []struct {
		name      string
		fail      func(grpc.ServerStreamingServer[enginev1.GenerateChunk]) error
		wantCode  int
		wantCalls int
	}{
		{"resource exhausted", func(grpc.ServerStreamingServer[enginev1.GenerateChunk]) error {
			return status.Error(codes.ResourceExhausted, "busy")
		}, 200, 2},
		{"unavailable", func(grpc.ServerStreamingServer[enginev1.GenerateChunk]) error {
			return status.Error(codes.Unavailable, "down")
		}, 200, 2},
		{"500 in the first chunk", func(st grpc.ServerStreamingServer[enginev1.GenerateChunk]) error {
			return st.Send(chunk(500, "application/json", `{"error":"boom"}`))
		}, 200, 2},
		{"invalid argument", func(grpc.ServerStreamingServer[enginev1.GenerateChunk]) error {
			return status.Error(codes.InvalidArgument, "bad")
		}, 400, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			eng := &scriptedEngine{}
			eng.generate = func(_ *enginev1.GenerateRequest, st grpc.ServerStreamingServer[enginev1.GenerateChunk]) error {
				if eng.calls() == 1 {
					return tt.fail(st)
				}
				return st.Send(chunk(200, "application/json", `{"ok":true}`))
			}
			w := e.grpcWorker(eng)
			code, _, _ := e.post("/v1/chat/completions", `{"messages":[]}`)
			if code != tt.wantCode || eng.calls() != tt.wantCalls {
				t.Fatalf("code %d after %d calls, want %d after %d", code, eng.calls(), tt.wantCode, tt.wantCalls)
			}
			if got := e.outcomesCopy(); len(got) != 1 || got[0] != (outcome{w.ID, tt.wantCode, false}) {
				t.Errorf("outcomes %v", got)
			}
		})
	}
}

// A stream cut after it started ends with the SSE error event, and counts as no answer.
func TestGRPCStreamCut(t *testing.T) {
	e := newEnv(t, Config{})
	eng := &scriptedEngine{generate: func(_ *enginev1.GenerateRequest, st grpc.ServerStreamingServer[enginev1.GenerateChunk]) error {
		_ = st.Send(chunk(200, "text/event-stream", `{"i":1}`))
		return status.Error(codes.Unavailable, "engine died")
	}}
	w := e.grpcWorker(eng)
	code, _, body := e.post("/v1/chat/completions", `{"stream":true,"messages":[]}`)
	if code != 200 || body != "data: {\"i\":1}\n\n"+string(sseUpstreamError) {
		t.Fatalf("answer %d %q", code, body)
	}
	testkit.For(t, "the outcome", func() bool { return len(e.outcomesCopy()) == 1 })
	if got := e.outcomesCopy()[0]; got != (outcome{w.ID, 0, true}) {
		t.Errorf("outcome %v, want no answer", got)
	}
}

// The real fake engine in gRPC mode answers chat, streamed or not, through the gateway; removing
// the worker closes its connection.
func TestGRPCFakeEngine(t *testing.T) {
	e := newEnv(t, Config{})
	fe := fakeengine.New(fakeengine.Config{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { fe.Close() })
	url, err := fe.StartGRPC("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := e.add(worker.Spec{URL: url})
	code, _, body := e.post("/v1/chat/completions", `{"model":"fake-model","messages":[{"role":"user","content":"hello grpc"}]}`)
	if code != 200 || !strings.Contains(body, "hello grpc") {
		t.Fatalf("chat %d %s", code, body)
	}
	code, hdr, body := e.post("/v1/chat/completions", `{"model":"fake-model","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	if code != 200 || hdr.Get("Content-Type") != "text/event-stream" || !strings.HasSuffix(body, "data: [DONE]\n\n") || strings.Count(body, "data: ") < 3 {
		t.Fatalf("stream %d %v %q", code, hdr, body)
	}
	if got := fe.Stats().ByGateway["gw-test"].Requests; got != 2 {
		t.Errorf("engine counted %d requests from gw-test, want 2", got)
	}
	tr := upstreamOf(w).rpc.(*grpcTransport)
	if err := e.gw.Pool().Remove(w.ID); err != nil {
		t.Fatal(err)
	}
	if s := tr.cc.GetState(); s != connectivity.Shutdown {
		t.Errorf("connection state after removal: %v", s)
	}
}
