package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/proc"
)

// GRPCHealthProbe is the grpc_health_probe the tests run, the client Kubernetes users run
// against gRPC health services: a Go module, built from the module proxy at this version.
const GRPCHealthProbe = "github.com/grpc-ecosystem/grpc-health-probe@v0.4.62"

var (
	probeOnce sync.Once
	probeBin  string
	probeErr  error
)

// GRPCHealthProbeBin returns the path of grpc_health_probe at GRPCHealthProbe's version: the
// one scripts/test-deps.sh installed into bin/tools (make test runs it first), or else one
// built once per test binary (go install into a temporary folder, which Main removes; the Go
// build cache makes later builds quick).
func GRPCHealthProbeBin(t testing.TB) string {
	t.Helper()
	probeOnce.Do(func() {
		if bin, ok := installedProbe(moduleRoot()); ok {
			probeBin = bin
			return
		}
		dir, err := tempDir("meshgw-grpc-health-probe-")
		if err != nil {
			probeErr = err
			return
		}
		cmd := exec.Command("go", "install", GRPCHealthProbe)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			probeErr = fmt.Errorf("go install %s: %v\n%s", GRPCHealthProbe, err, out)
			return
		}
		probeBin = filepath.Join(dir, "grpc-health-probe")
	})
	if probeErr != nil {
		t.Fatal(probeErr)
	}
	return probeBin
}

// installedProbe is the grpc_health_probe scripts/test-deps.sh installed under root's bin/tools,
// if it did at GRPCHealthProbe's version: its stamp file names the version.
func installedProbe(root string) (string, bool) {
	_, version, _ := strings.Cut(GRPCHealthProbe, "@")
	tools := filepath.Join(root, "bin", "tools")
	bin := filepath.Join(tools, "grpc-health-probe")
	if _, err := os.Stat(filepath.Join(tools, ".grpc-health-probe-"+version)); err != nil {
		return "", false
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		return "", false
	}
	return bin, true
}

// ProbeGRPCHealth runs grpc_health_probe against addr (host:port) for service ("" for the
// server as a whole) and returns its exit status (0 SERVING, 2 no connection, 3 RPC failed,
// 4 not SERVING) and output.
func ProbeGRPCHealth(t testing.TB, addr, service string) (int, string) {
	t.Helper()
	args := []string{"-addr", addr, "-connect-timeout", "2s", "-rpc-timeout", "2s"}
	if service != "" {
		args = append(args, "-service", service)
	}
	cmd := exec.Command(GRPCHealthProbeBin(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("grpc_health_probe: %v", err)
	return -1, ""
}

// WaitGRPCHealth waits until grpc_health_probe against addr exits with code, within d.
func WaitGRPCHealth(t testing.TB, d time.Duration, addr, service string, code int) {
	t.Helper()
	var got int
	var out string
	probe := func() bool {
		got, out = ProbeGRPCHealth(t, addr, service)
		return got == code
	}
	if proc.Until(context.Background(), d, 50*time.Millisecond, "grpc_health_probe", probe) != nil {
		t.Fatalf("grpc_health_probe -addr %s -service %q: exit %d (%s), want %d within %v", addr, service, got, out, code, d)
	}
}
