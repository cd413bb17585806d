package health

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/meshgw/meshgw/worker"
)

// grpcEngine is a real gRPC health server on 127.0.0.1 that records the metadata it receives.
type grpcEngine struct {
	url    string
	health *health.Server
	mu     sync.Mutex
	md     metadata.MD
}

func startGRPC(t *testing.T) *grpcEngine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &grpcEngine{url: "grpc://" + ln.Addr().String(), health: health.NewServer()}
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		e.mu.Lock()
		e.md = md
		e.mu.Unlock()
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, e.health)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return e
}

func grpcTarget(url string) Target {
	return Target{ID: "w-grpc", URL: url, Mode: worker.ModeGRPC, GatewayID: "gw-2", APIKey: "sk-grpc-key"}
}

func probeWithin(p Prober, tg Target) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Probe(ctx, tg)
}

func TestGRPCProberServingStatus(t *testing.T) {
	const sglang = "sglang.grpc.scheduler.SglangScheduler"
	tests := []struct {
		name    string
		service string
		set     healthpb.HealthCheckResponse_ServingStatus
		reason  string // "" = healthy
	}{
		{"serving", "", healthpb.HealthCheckResponse_SERVING, ""},
		{"not_serving", "", healthpb.HealthCheckResponse_NOT_SERVING, "NOT_SERVING"},
		{"unknown", "", healthpb.HealthCheckResponse_UNKNOWN, "UNKNOWN"},
		{"named_service_serving", sglang, healthpb.HealthCheckResponse_SERVING, ""},
		{"named_service_not_serving", sglang, healthpb.HealthCheckResponse_NOT_SERVING, "NOT_SERVING"},
		{"service_unknown", "no.such.Service", -1, "SERVICE_UNKNOWN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eng := startGRPC(t)
			if tc.set >= 0 {
				eng.health.SetServingStatus(tc.service, tc.set)
			}
			p := &GRPCProber{}
			defer p.Close()
			tg := grpcTarget(eng.url)
			tg.Service = tc.service
			err := probeWithin(p, tg)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Probe() = %v, want healthy", err)
				}
				return
			}
			var pe *ProbeError
			if !errors.As(err, &pe) || pe.Reason != tc.reason {
				t.Fatalf("Probe() = %v, want reason %s", err, tc.reason)
			}
		})
	}
}

func TestGRPCProberMetadataAndCache(t *testing.T) {
	eng := startGRPC(t)
	p := &GRPCProber{}
	defer p.Close()
	tg := grpcTarget(eng.url)
	if err := probeWithin(p, tg); err != nil {
		t.Fatal(err)
	}
	eng.mu.Lock()
	md := eng.md
	eng.mu.Unlock()
	if got := md.Get("x-mesh-gateway"); len(got) != 1 || got[0] != "gw-2" {
		t.Errorf("x-mesh-gateway = %v", got)
	}
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer sk-grpc-key" {
		t.Errorf("authorization = %v", got)
	}
	cc := p.conns[tg.ID].cc
	if err := probeWithin(p, tg); err != nil {
		t.Fatal(err)
	}
	if p.conns[tg.ID].cc != cc || len(p.conns) != 1 {
		t.Error("second probe did not reuse the cached connection")
	}
	p.Forget(tg.ID)
	if cc.GetState() != connectivity.Shutdown || len(p.conns) != 0 {
		t.Errorf("Forget left the connection %v", cc.GetState())
	}
}

// TestGRPCProberDownThenUp: a closed port fails; an engine that comes up on it is seen by the
// same cached connection within the reconnect backoff.
func TestGRPCProberDownThenUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &GRPCProber{}
	defer p.Close()
	tg := grpcTarget("grpc://" + addr)
	err = probeWithin(p, tg)
	var pe *ProbeError
	if !errors.As(err, &pe) || strings.Contains(err.Error(), tg.APIKey) {
		t.Fatalf("Probe() of a closed port = %v, want a failure without the key", err)
	}
	if err := probeWithin(p, grpcTarget("http://"+addr)); err == nil {
		t.Error("non-grpc:// url accepted")
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken again: %v", addr, err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	defer func() { srv.Stop(); <-done }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for probeWithin(p, tg) != nil {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("restarted engine not seen healthy within 10 s")
		}
	}
	if p.Close(); probeWithin(p, tg) == nil {
		t.Error("Probe after Close succeeded")
	}
}

func TestGRPCProberTimeout(t *testing.T) {
	eng := startGRPC(t)
	p := &GRPCProber{}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	err := p.Probe(ctx, grpcTarget(eng.url))
	if !errors.Is(err, ErrTimeout) {
		t.Errorf("Probe() with an expired context = %v, want a timeout", err)
	}
}
