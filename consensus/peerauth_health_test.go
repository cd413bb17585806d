package consensus

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/meshgw/meshgw/mesh"
)

// TestPeerAuthOpensHealthOnly: a caller that is no member (a Kubernetes probe) may ask the
// standard health service, Check and Watch, and nothing else.
func TestPeerAuthOpensHealthOnly(t *testing.T) {
	auth := &PeerAuth{Members: meshOf{{ID: "n1", Status: mesh.StatusAlive, Address: "127.0.0.2:7946"}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(auth.ServerOptions()...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	s.RegisterService(&otherService, struct{}{})
	served := make(chan struct{})
	go func() { defer close(served); _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Stop(); <-served })
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}} // not a member's host
	cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := healthpb.NewHealthClient(cc)
	if r, err := c.Check(testCtx(t), &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Check from a non-member: %v, %v", r, err)
	}
	w, err := c.Watch(testCtx(t), &healthpb.HealthCheckRequest{})
	if err == nil {
		var r *healthpb.HealthCheckResponse
		r, err = w.Recv()
		if err == nil && r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Watch: %v", r)
		}
	}
	if err != nil {
		t.Errorf("Watch from a non-member: %v", err)
	}
	// Any other method still goes through admit: refused before the server looks for it.
	err = cc.Invoke(testCtx(t), "/test.Other/Call", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("another method from a non-member: %v, want PermissionDenied", err)
	}
}

// otherService is a service besides health, whose one method answers when admitted.
var otherService = grpc.ServiceDesc{
	ServiceName: "test.Other",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(healthpb.HealthCheckRequest)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(context.Context, any) (any, error) { return &healthpb.HealthCheckResponse{}, nil }
		return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Other/Call"}, h)
	}}},
}
