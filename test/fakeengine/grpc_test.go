package fakeengine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	enginev1 "github.com/meshgw/meshgw/api/engine/v1"
	"github.com/meshgw/meshgw/test/testkit"
)

// grpcHarness is one engine in gRPC mode with a client connection and an HTTP harness on the
// same port for the control endpoints.
type grpcHarness struct {
	*harness
	health healthpb.HealthClient
	engine enginev1.EngineClient
}

func newGRPCHarness(t *testing.T) *grpcHarness {
	t.Helper()
	e := New(Config{NodeName: "node-g"})
	url, err := e.StartGRPC("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "grpc://127.0.0.1:") {
		t.Fatalf("StartGRPC returned %q", url)
	}
	target := strings.TrimPrefix(url, "grpc://")
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, e: e, url: "http://" + target, client: newClient(t)}
	t.Cleanup(func() {
		cc.Close()
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &grpcHarness{harness: h, health: healthpb.NewHealthClient(cc), engine: enginev1.NewEngineClient(cc)}
}

func withGateway(gateway string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), GatewayMetadata, gateway)
}

func TestGRPCHealth(t *testing.T) {
	g := newGRPCHarness(t)
	tests := []struct {
		name, service, patch string
		want                 healthpb.HealthCheckResponse_ServingStatus
		wantCode             codes.Code
	}{
		{"server", "", `{}`, healthpb.HealthCheckResponse_SERVING, codes.OK},
		{"sglang scheduler", SGLangSchedulerService, `{}`, healthpb.HealthCheckResponse_SERVING, codes.OK},
		{"engine", EngineService, `{}`, healthpb.HealthCheckResponse_SERVING, codes.OK},
		{"unhealthy", SGLangSchedulerService, `{"health_status":503}`, healthpb.HealthCheckResponse_NOT_SERVING, codes.OK},
		{"unknown service", "other.Service", `{}`, 0, codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g.fault(tt.patch)
			resp, err := g.health.Check(withGateway("gw-h"), &healthpb.HealthCheckRequest{Service: tt.service})
			if status.Code(err) != tt.wantCode {
				t.Fatalf("Check: %v, want code %v", err, tt.wantCode)
			}
			if err == nil && resp.GetStatus() != tt.want {
				t.Errorf("status %v, want %v", resp.GetStatus(), tt.want)
			}
		})
	}
	if s := g.e.Stats(); s.Probes != 5 || s.ByGateway["gw-h"].Probes != 5 {
		t.Errorf("stats %+v, want 5 probes by gw-h", s)
	}
}

func TestGRPCHealthWatchFollowsFaults(t *testing.T) {
	g := newGRPCHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := g.health.Watch(ctx, &healthpb.HealthCheckRequest{Service: SGLangSchedulerService})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		patch string
		want  healthpb.HealthCheckResponse_ServingStatus
	}{
		{"", healthpb.HealthCheckResponse_SERVING},
		{`{"health_status":500}`, healthpb.HealthCheckResponse_NOT_SERVING},
		{`{}`, healthpb.HealthCheckResponse_SERVING},
	} {
		if step.patch != "" {
			g.fault(step.patch)
		}
		resp, err := w.Recv()
		if err != nil || resp.GetStatus() != step.want {
			t.Fatalf("after %q: %v %v, want %v", step.patch, resp.GetStatus(), err, step.want)
		}
	}
}

// generate runs one Generate call and returns its chunks and the final error (nil at a clean
// end).
func (g *grpcHarness) generate(ctx context.Context, req *enginev1.GenerateRequest) ([]*enginev1.GenerateChunk, error) {
	stream, err := g.engine.Generate(ctx, req)
	if err != nil {
		return nil, err
	}
	var chunks []*enginev1.GenerateChunk
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return chunks, nil
		}
		if err != nil {
			return chunks, err
		}
		chunks = append(chunks, c)
	}
}

func TestGRPCGenerateMatchesHTTP(t *testing.T) {
	g := newGRPCHarness(t)
	want := AnswerText("node-g", "hi")
	chunks, err := g.generate(context.Background(), &enginev1.GenerateRequest{Route: RouteChat, Body: []byte(chatBody), Gateway: "gw-1"})
	if err != nil || len(chunks) != 1 {
		t.Fatalf("non-streamed: %d chunks, %v", len(chunks), err)
	}
	if c := chunks[0]; c.Status != 200 || c.ContentType != contentJSON || textOf(t, RouteChat, false, c.Data) != want {
		t.Errorf("non-streamed chunk: %d %q %s", c.Status, c.ContentType, c.Data)
	}
	chunks, err = g.generate(withGateway("gw-2"), &enginev1.GenerateRequest{Route: RouteChat, Body: []byte(chatBody), Stream: true})
	if err != nil || len(chunks) != 21 {
		t.Fatalf("streamed: %d chunks, %v; want 20 and [DONE]", len(chunks), err)
	}
	if c := chunks[0]; c.Status != 200 || c.ContentType != contentSSE {
		t.Errorf("first chunk: %d %q", c.Status, c.ContentType)
	}
	var got string
	for i, c := range chunks[:20] {
		if i > 0 && (c.Status != 0 || c.ContentType != "") {
			t.Errorf("chunk %d repeats the status", i)
		}
		got += textOf(t, RouteChat, true, c.Data)
	}
	if got != want || string(chunks[20].Data) != "[DONE]" {
		t.Errorf("streamed text %q (last %q), want %q then [DONE]", got, chunks[20].Data, want)
	}
	wantStats := map[string]GatewayStats{"gw-1": {Requests: 1}, "gw-2": {Requests: 1}}
	if diff := cmp.Diff(wantStats, g.e.Stats().ByGateway); diff != "" {
		t.Errorf("by gateway (-want +got):\n%s", diff)
	}
	models, err := g.engine.Models(context.Background(), &enginev1.ModelsRequest{})
	if err != nil || !cmp.Equal(models.GetModels(), []string{"fake-model"}) {
		t.Errorf("Models: %v %v", models.GetModels(), err)
	}
}

func TestGRPCFaults(t *testing.T) {
	g := newGRPCHarness(t)
	req := &enginev1.GenerateRequest{Route: RouteChat, Body: []byte(chatBody), Stream: true}
	t.Run("error status is the first chunk's status", func(t *testing.T) {
		g.fault(`{"error_status":429}`)
		chunks, err := g.generate(context.Background(), req)
		var env struct{ Error struct{ Code int } }
		if err != nil || len(chunks) != 1 || chunks[0].Status != 429 || json.Unmarshal(chunks[0].Data, &env) != nil || env.Error.Code != 429 {
			t.Errorf("got %v, %v; want one 429 chunk with an OpenAI envelope", chunks, err)
		}
	})
	t.Run("cut aborts with UNAVAILABLE", func(t *testing.T) {
		g.fault(`{"error_status":0,"cut_stream_after":3}`)
		chunks, err := g.generate(context.Background(), req)
		if len(chunks) != 3 || status.Code(err) != codes.Unavailable {
			t.Errorf("got %d chunks, %v; want 3 then UNAVAILABLE", len(chunks), err)
		}
	})
	t.Run("hang until the client gives up", func(t *testing.T) {
		g.fault(`{"cut_stream_after":0,"hang":true}`)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { _, err := g.generate(ctx, req); errc <- err }()
		testkit.For(t, "the call to hang", func() bool { return g.e.hanging.Load() == 1 })
		cancel()
		if err := <-errc; status.Code(err) != codes.Canceled {
			t.Errorf("got %v, want CANCELED", err)
		}
		testkit.For(t, "the handler to end", func() bool { return g.e.hanging.Load() == 0 })
	})
	t.Run("control endpoints on the same port", func(t *testing.T) {
		g.fault(`{}`)
		code, body := g.do("GET", "/_stats", "", "")
		var s Stats
		if err := json.Unmarshal(body, &s); err != nil || code != 200 || s.Requests != 3 {
			t.Errorf("GET /_stats over HTTP/1.1 on the gRPC port: %d %s", code, body)
		}
	})
}

func TestShortHTTP1RequestOnTheGRPCPort(t *testing.T) {
	g := newGRPCHarness(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// 24 bytes would be the HTTP/2 preface's length; this request is shorter and must not wait.
	if _, err := conn.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a short request: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("status %d, want the HTTP API's 404 for /", resp.StatusCode)
	}
}
