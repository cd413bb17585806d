package e2e

import (
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

var rpcLine = regexp.MustCompile(`msg="meshgw started" .*\brpc=(\S+)`)

// TestGRPCHealthProbe runs grpc_health_probe, as a Kubernetes gRPC probe would, against the fake
// engine's gRPC mode and against meshgw's gRPC port: SERVING while ready, NOT_SERVING (exit 4)
// once not.
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

// TestGRPCHealthProbeOverTLS: under mutual TLS the gRPC listener's handshake takes only node
// certificates of the cluster's CA; grpc_health_probe with one gets the health answer, and
// without a certificate it gets no connection.
func TestGRPCHealthProbeOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	probe := harness.GRPCHealthProbeBin(t)
	b := harness.Build(t)
	dir := t.TempDir()
	for _, args := range [][]string{{"meshctl", "cert", "create-ca", "--dir", dir}, {"meshctl", "cert", "create-node", "gw-tls", "--host", "127.0.0.1", "--dir", dir},
		{"meshctl", "cert", "create-node", "prober", "--host", "127.0.0.1", "--dir", dir}} {
		runMeshctl(t, b, dir, args)
	}
	engine := harness.StartEngine(t, b, "engine-tls")
	gw := harness.StartGateway(t, b, "meshgw-tls", "--node-id", "gw-tls", "--worker-urls", engine.URL,
		"--tls-cert", filepath.Join(dir, "node-gw-tls.crt"), "--tls-key", filepath.Join(dir, "node-gw-tls.key"), "--tls-ca", filepath.Join(dir, "ca.crt"))
	gw.WaitReady(t, 20*time.Second)
	var rpc string
	harness.WaitFor(t, 10*time.Second, "the start line's rpc address", func() bool {
		m := rpcLine.FindStringSubmatch(gw.Output())
		if m != nil {
			rpc = m[1]
		}
		return m != nil
	})
	tlsArgs := []string{"-tls", "-tls-ca-cert", filepath.Join(dir, "ca.crt"), "-tls-client-cert", filepath.Join(dir, "node-prober.crt"),
		"-tls-client-key", filepath.Join(dir, "node-prober.key")}
	run := func(extra ...string) (int, string) {
		out, err := exec.Command(probe, append([]string{"-addr", rpc, "-connect-timeout", "10s", "-rpc-timeout", "5s"}, extra...)...).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run(tlsArgs...); code != 0 {
		t.Errorf("with a node certificate: exit %d (%s), want 0 (SERVING)", code, out)
	}
	if code, out := run("-tls", "-tls-ca-cert", filepath.Join(dir, "ca.crt")); code == 0 {
		t.Errorf("without a client certificate: exit 0 (%s), want no answer", out)
	}
}
