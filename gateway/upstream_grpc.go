package gateway

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	enginev1 "github.com/meshgw/meshgw/api/engine/v1"
	"github.com/meshgw/meshgw/breaker"
)

// maxRPCAnswer bounds one chunk of a gRPC worker's answer.
const maxRPCAnswer = 64 << 20

// grpcTransport sends model requests to a gRPC worker through meshgw.engine.v1.Engine/Generate,
// over one client connection per worker. The connection is closed when the pool drops the
// worker, once the requests in flight on it have ended.
type grpcTransport struct {
	drainClose
	cc     *grpc.ClientConn
	engine enginev1.EngineClient
}

// newGRPCTransport dials (lazily: no I/O here) the worker at host:port.
func (g *Gateway) newGRPCTransport(addr string) rpcTransport {
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(maxRPCAnswer),
			grpc.MaxCallSendMsgSize(int(min(g.cfg.MaxPayload+64<<10, math.MaxInt32))),
		),
	)
	if err != nil {
		return brokenTransport{err: err}
	}
	t := &grpcTransport{cc: cc, engine: enginev1.NewEngineClient(cc)}
	t.closeFn = func() { _ = cc.Close() }
	return t
}

func (t *grpcTransport) open(ctx context.Context, req *rpcRequest) (rpcStream, error) {
	if !t.acquire() {
		return nil, errTransportClosed
	}
	md := []string{"x-mesh-gateway", req.gateway, "x-request-id", req.requestID}
	if req.auth != "" {
		md = append(md, "authorization", req.auth)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, md...)
	s, err := t.engine.Generate(ctx, &enginev1.GenerateRequest{
		Route: req.route, Body: req.body, Stream: req.stream, RequestId: req.requestID, Gateway: req.gateway,
	})
	if err != nil {
		t.release()
		return nil, err
	}
	return &grpcStream{t: t, s: s}, nil
}

// statusOf maps the gRPC status that ended the call (DESIGN.md section 7).
func (t *grpcTransport) statusOf(err error) int {
	if errors.Is(err, errTransportClosed) || errors.Is(err, errEmptyAnswer) {
		return 0
	}
	st, ok := status.FromError(err)
	if !ok {
		return 0
	}
	return breaker.HTTPStatusFromGRPC(st.Code())
}

// grpcStream is one Generate call.
type grpcStream struct {
	t    *grpcTransport
	s    grpc.ServerStreamingClient[enginev1.GenerateChunk]
	once sync.Once
}

func (s *grpcStream) next() (rpcChunk, error) {
	m, err := s.s.Recv()
	if err != nil {
		return rpcChunk{}, err
	}
	return rpcChunk{status: int(m.GetStatus()), contentType: m.GetContentType(), data: m.GetData()}, nil
}

// close releases the connection; the caller cancels the call's context.
func (s *grpcStream) close() { s.once.Do(s.t.release) }

// brokenTransport stands in for a worker whose client could not be made: every attempt fails
// with no answer.
type brokenTransport struct{ err error }

func (b brokenTransport) open(context.Context, *rpcRequest) (rpcStream, error) { return nil, b.err }
func (b brokenTransport) statusOf(error) int                                   { return 0 }
func (b brokenTransport) close()                                               {}
