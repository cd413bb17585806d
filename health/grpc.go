package health

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshgw/meshgw/worker"
)

// GRPCProber probes gRPC engines with the standard grpc.health.v1.Health/Check. It keeps one
// client connection per worker, closed when the Checker drops the worker (Forget) or on Close.
// The gateway's node id goes as metadata x-mesh-gateway, the API key as a bearer authorization.
type GRPCProber struct {
	// DialOptions are added after the defaults (insecure credentials for grpc://, a reconnect
	// backoff capped at 5 s so that a restarted engine is seen soon).
	DialOptions []grpc.DialOption

	mu     sync.Mutex
	conns  map[worker.ID]grpcConn
	closed bool
}

type grpcConn struct {
	url string
	cc  *grpc.ClientConn
}

// Probe implements Prober. NOT_SERVING, UNKNOWN and SERVICE_UNKNOWN are failures.
func (p *GRPCProber) Probe(ctx context.Context, t Target) error {
	cc, err := p.conn(t)
	if err != nil {
		return err
	}
	md := []string{"x-mesh-gateway", t.GatewayID}
	if t.APIKey != "" {
		md = append(md, "authorization", "Bearer "+t.APIKey)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, md...)
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: t.Service})
	if err != nil {
		return grpcError(ctx, err)
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return &ProbeError{Reason: s.String()}
	}
	return nil
}

// conn returns the cached connection of t, dialing it (lazily: no I/O here) when missing.
func (p *GRPCProber) conn(t Target) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, &ProbeError{Reason: "prober closed"}
	}
	if c, ok := p.conns[t.ID]; ok && c.url == t.URL {
		return c.cc, nil
	} else if ok {
		c.cc.Close() // the worker's URL changed
		delete(p.conns, t.ID)
	}
	addr, ok := strings.CutPrefix(t.URL, "grpc://")
	if !ok {
		return nil, &ProbeError{Reason: "not a grpc:// url"}
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	}, p.DialOptions...)
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, &ProbeError{Reason: "grpc client: " + err.Error()}
	}
	if p.conns == nil {
		p.conns = make(map[worker.ID]grpcConn)
	}
	p.conns[t.ID] = grpcConn{url: t.URL, cc: cc}
	return cc, nil
}

// Forget closes the connection of a worker the Checker no longer probes.
func (p *GRPCProber) Forget(id worker.ID) {
	p.mu.Lock()
	c, ok := p.conns[id]
	delete(p.conns, id)
	p.mu.Unlock()
	if ok {
		c.cc.Close()
	}
}

// Close closes every connection; later probes fail.
func (p *GRPCProber) Close() error {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range conns {
		c.cc.Close()
	}
	return nil
}

// grpcError explains a failed Check call.
func grpcError(ctx context.Context, err error) *ProbeError {
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), context.Canceled) {
			return &ProbeError{Reason: "canceled", Err: context.Canceled}
		}
		return &ProbeError{Reason: "timeout", Err: ErrTimeout}
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.DeadlineExceeded:
		return &ProbeError{Reason: "timeout", Err: ErrTimeout}
	case codes.NotFound:
		return &ProbeError{Reason: healthpb.HealthCheckResponse_SERVICE_UNKNOWN.String()}
	}
	return &ProbeError{Reason: "rpc " + st.Code().String() + ": " + st.Message()}
}
