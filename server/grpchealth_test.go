package server

import (
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// TestGRPCHealthFollowsReadiness: grpc_health_probe against meshgw's gRPC port answers
// NOT_SERVING while the gateway has no routable worker, SERVING once it has one, for the
// server ("") and for "meshgw".
func TestGRPCHealthFollowsReadiness(t *testing.T) {
	harness.GRPCHealthProbeBin(t)                                        // built before the daemon starts, outside its deadlines
	d := startGateway(t, func(c *Config) { c.Gateway.AdminAPIKey = "" }) // the probe proves no cluster key
	addr := d.RPCAddr()
	if code, out := harness.ProbeGRPCHealth(t, addr, ""); code != 4 {
		t.Errorf("no workers: grpc_health_probe exit %d (%s), want 4 (NOT_SERVING)", code, out)
	}
	if code, out := d.do(t, "POST", "/workers", `{"url":"http://127.0.0.1:9"}`); code != 201 {
		t.Fatalf("register: %d %s", code, out)
	}
	harness.WaitGRPCHealth(t, 15*time.Second, addr, "", 0)
	harness.WaitGRPCHealth(t, 5*time.Second, addr, grpcHealthService, 0)
	if code, out := harness.ProbeGRPCHealth(t, addr, "other"); code != 3 && code != 4 {
		t.Errorf("unknown service: exit %d (%s), want NOT_FOUND (3)", code, out)
	}
}
