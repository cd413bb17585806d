package main

import (
	"regexp"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

var rpcListen = regexp.MustCompile(`msg="meshgw started" .*\brpc=(\S+)`)

// TestGRPCHealthFollowsReadiness: grpc_health_probe against meshgw's gRPC port answers
// NOT_SERVING while the gateway has no routable worker, SERVING once it has one, for the
// server ("") and for "meshgw".
func TestGRPCHealthFollowsReadiness(t *testing.T) {
	harness.GRPCHealthProbeBin(t) // built before the daemon starts, outside its deadlines
	d := startDaemon(t, "--ephemeral")
	m := rpcListen.FindStringSubmatch(d.logs.String())
	if m == nil {
		t.Fatalf("no rpc address in the start line: %s", d.logs.String())
	}
	addr := m[1]
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
