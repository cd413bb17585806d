package fakeengine

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	enginev1 "github.com/meshgw/meshgw/api/engine/v1"
)

// Service names the gRPC health service answers for: the whole server, SGLang's scheduler (for
// readiness, as SGLang registers it) and meshgw's engine service.
const (
	SGLangSchedulerService = "sglang.grpc.scheduler.SglangScheduler"
	EngineService          = "meshgw.engine.v1.Engine"
)

// GatewayMetadata is the gRPC metadata key that names the sending gateway.
const GatewayMetadata = "x-mesh-gateway"

// StartGRPC serves, on one port, gRPC (grpc.health.v1.Health and meshgw.engine.v1.Engine) and,
// over HTTP/1.1, the whole HTTP API including /_fault and /_stats. Connections are told apart by
// the HTTP/2 preface, so HTTP/2 requests other than gRPC are not served. It returns
// "grpc://HOST:PORT"; the control endpoints are at "http://HOST:PORT".
func (e *Engine) StartGRPC(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	e.nameFromAddr(ln.Addr())
	split := newSplitListener(ln)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, &grpcHealth{e: e})
	enginev1.RegisterEngineServer(gs, &grpcEngine{e: e})
	hs := &http.Server{
		Handler:           e.handler,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(e.log.Handler(), slog.LevelDebug),
	}
	err = e.addCloser(func() error {
		err := split.close()
		gs.Stop()
		hs.Close()
		return err
	})
	if err != nil {
		ln.Close()
		return "", err
	}
	e.goSafe("grpc split listener", func() { split.run(e) })
	e.goSafe("grpc server", func() { _ = gs.Serve(split.h2) })
	e.goSafe("grpc control server", func() { _ = hs.Serve(split.http1) })
	return "grpc://" + ln.Addr().String(), nil
}

// gatewayFromMetadata reads x-mesh-gateway from the incoming metadata.
func gatewayFromMetadata(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, GatewayMetadata); len(v) > 0 {
		return v[0]
	}
	return ""
}

// grpcHealth is the standard health service, SERVING while health_status is 2xx.
type grpcHealth struct {
	healthpb.UnimplementedHealthServer
	e *Engine
}

func servingStatus(f Faults) healthpb.HealthCheckResponse_ServingStatus {
	if is2xx(f.HealthStatus) {
		return healthpb.HealthCheckResponse_SERVING
	}
	return healthpb.HealthCheckResponse_NOT_SERVING
}

func knownService(name string) bool {
	return name == "" || name == SGLangSchedulerService || name == EngineService
}

// Check answers one probe, and counts it.
func (h *grpcHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.e.stats.countProbe(gatewayFromMetadata(ctx))
	if !knownService(req.GetService()) {
		return nil, status.Errorf(codes.NotFound, "unknown service %q", req.GetService())
	}
	return &healthpb.HealthCheckResponse{Status: servingStatus(h.e.Faults())}, nil
}

// List answers the status of every service the fake registers.
func (h *grpcHealth) List(ctx context.Context, _ *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	st := &healthpb.HealthCheckResponse{Status: servingStatus(h.e.Faults())}
	return &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{
		"": st, SGLangSchedulerService: st, EngineService: st,
	}}, nil
}

// Watch sends the status, then every change of it; it counts as one probe.
func (h *grpcHealth) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	ctx := stream.Context()
	h.e.stats.countProbe(gatewayFromMetadata(ctx))
	if !knownService(req.GetService()) {
		return status.Errorf(codes.NotFound, "unknown service %q", req.GetService())
	}
	last := healthpb.HealthCheckResponse_SERVICE_UNKNOWN
	for {
		st := h.e.state.Load()
		if s := servingStatus(st.f); s != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: s}); err != nil {
				return err
			}
			last = s
		}
		select {
		case <-st.changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-h.e.done:
			return status.Error(codes.Unavailable, "fake engine closed")
		}
	}
}

// grpcEngine serves meshgw.engine.v1.Engine with the same answers and faults as HTTP.
type grpcEngine struct {
	enginev1.UnimplementedEngineServer
	e *Engine
}

// Generate answers one model request. Every answer, an injected error included, is a normal
// stream of chunks whose first carries the HTTP-equivalent status, and the RPC ends OK; only
// transport-level faults are gRPC errors: cut_stream_after aborts with UNAVAILABLE, a closing
// engine with UNAVAILABLE, a client that went away with its context's code.
func (g *grpcEngine) Generate(req *enginev1.GenerateRequest, stream grpc.ServerStreamingServer[enginev1.GenerateChunk]) error {
	gateway := req.GetGateway()
	if gateway == "" {
		gateway = gatewayFromMetadata(stream.Context())
	}
	err := g.e.serve(stream.Context(), modelRequest{
		route: req.GetRoute(), body: req.GetBody(), stream: req.GetStream(), gateway: gateway,
	}, &grpcSink{stream: stream})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrClosed):
		return status.Error(codes.Unavailable, "fake engine closed")
	case errors.Is(err, errCut):
		return status.Error(codes.Unavailable, "fake engine cut the stream (cut_stream_after)")
	}
	return status.FromContextError(err).Err()
}

// Models lists the one model the engine serves.
func (g *grpcEngine) Models(context.Context, *enginev1.ModelsRequest) (*enginev1.ModelsResponse, error) {
	return &enginev1.ModelsResponse{Models: []string{g.e.cfg.Model}}, nil
}

var errCut = errors.New("fakeengine: stream cut by the cut_stream_after fault")

// grpcSink sends one chunk per SSE payload, or the whole body as one chunk; the first carries
// the status and content type.
type grpcSink struct {
	stream      grpc.ServerStreamingServer[enginev1.GenerateChunk]
	status      int32
	contentType string
}

func (s *grpcSink) start(status int, contentType string, _ int) error {
	s.status, s.contentType = int32(status), contentType
	return nil
}

func (s *grpcSink) send(p []byte) error {
	c := &enginev1.GenerateChunk{Status: s.status, ContentType: s.contentType, Data: p}
	s.status, s.contentType = 0, ""
	return s.stream.Send(c)
}

func (s *grpcSink) cut() error { return errCut }
