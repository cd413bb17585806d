package server

import (
	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// grpcHealth is the standard grpc.health.v1 service on meshgw's gRPC port (--rpc-port), for
// Kubernetes gRPC probes and grpc_health_probe: the overall service ("") and "meshgw" answer
// SERVING while /readiness answers 200, NOT_SERVING otherwise (no routable worker, draining,
// or no quorum with --readiness-requires-quorum).
type grpcHealth struct{ s *grpchealth.Server }

// grpcHealthService is the service name meshgw answers for besides "".
const grpcHealthService = "meshgw"

func newGRPCHealth() *grpcHealth {
	h := &grpcHealth{s: grpchealth.NewServer()}
	h.set(false)
	return h
}

// register adds the service to the gRPC server before it serves.
func (h *grpcHealth) register(s *grpc.Server) { healthpb.RegisterHealthServer(s, h.s) }

// set is the gateway's Config.OnReadiness.
func (h *grpcHealth) set(ready bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ready {
		st = healthpb.HealthCheckResponse_SERVING
	}
	h.s.SetServingStatus("", st)
	h.s.SetServingStatus(grpcHealthService, st)
}
