package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

var rpcLine = regexp.MustCompile(`msg="meshgw started" .*\brpc=(\S+)`)

// TestGRPCHealthProbe runs grpc_health_probe, as a Kubernetes gRPC probe would, against the fake
// engine's gRPC mode and against meshgw's gRPC port: SERVING while ready, NOT_SERVING (exit 4)
// once not (issue 14 point 10).
func TestGRPCHealthProbe(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	harness.GRPCHealthProbeBin(t)
	b := harness.Build(t)
	engine := harness.StartEngine(t, b, "grpc-engine", "--mode", "grpc")
	addr := strings.TrimPrefix(engine.URL, "grpc://")
	for _, svc := range []string{"", "sglang.grpc.scheduler.SglangScheduler", "meshgw.engine.v1.Engine"} {
		if code, out := harness.ProbeGRPCHealth(t, addr, svc); code != 0 {
			t.Errorf("engine %q: exit %d (%s), want 0", svc, code, out)
		}
	}
	fault(t, engine, `{"health_status": 503}`)
	harness.WaitGRPCHealth(t, 10*time.Second, addr, "", 4)
	fault(t, engine, `{}`)
	harness.WaitGRPCHealth(t, 10*time.Second, addr, "", 0)

	gw := harness.StartGateway(t, b, "meshgw", "--worker-urls", engine.URL, "--health-check-interval-secs", "1")
	var rpc string
	harness.WaitFor(t, 10*time.Second, "the start line's rpc address", func() bool {
		m := rpcLine.FindStringSubmatch(gw.Output())
		if m != nil {
			rpc = m[1]
		}
		return m != nil
	})
	harness.WaitGRPCHealth(t, 20*time.Second, rpc, "", 0)
	harness.WaitGRPCHealth(t, 5*time.Second, rpc, "meshgw", 0)
	fault(t, engine, `{"health_status": 503}`) // the only worker leaves routing: not ready
	harness.WaitGRPCHealth(t, 20*time.Second, rpc, "", 4)
	fault(t, engine, `{}`)
	harness.WaitGRPCHealth(t, 20*time.Second, rpc, "", 0)
}
