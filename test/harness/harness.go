// Package harness starts real meshgw and fakeworker processes for the multi-process tests in
// test/, on test/proc: it builds the binaries once, picks loopback ports, waits for each
// process to be ready on a condition with a deadline (failing the test if not), and kills every
// process it started when the test ends.
package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/loopport"
	"github.com/meshgw/meshgw/test/proc"
)

// Bins names the built binaries.
type Bins struct {
	Meshgw, Fakeworker, Meshctl string
}

var (
	buildOnce sync.Once
	bins      Bins
	buildErr  error
	// buildPkgs are the packages Build compiles, from the module's root.
	buildPkgs = []string{"./cmd/meshgw", "./cmd/fakeworker", "./cmd/meshctl"}
)

// Build compiles cmd/meshgw, cmd/fakeworker and cmd/meshctl once per test binary into a
// temporary folder, which Main removes when the tests end (about 130 MB each time otherwise).
// MESHGW_BIN_DIR reuses binaries built elsewhere (make build).
func Build(t testing.TB) Bins {
	t.Helper()
	buildOnce.Do(func() {
		if dir := os.Getenv("MESHGW_BIN_DIR"); dir != "" {
			bins = binsIn(dir)
			return
		}
		dir, err := tempDir("meshgw-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		if buildErr = proc.Build(moduleRoot(), dir, buildPkgs...); buildErr == nil {
			bins = binsIn(dir)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bins
}

var (
	tempMu   sync.Mutex
	tempDirs []string // what Build and GRPCHealthProbeBin compiled into; Main removes them
)

// tempDir makes a temporary folder for binaries that Main removes.
func tempDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err == nil {
		tempMu.Lock()
		tempDirs = append(tempDirs, dir)
		tempMu.Unlock()
	}
	return dir, err
}

// Main runs a test binary's tests and then removes the binaries Build and GRPCHealthProbeBin
// compiled for them. A package whose tests call either runs it from TestMain:
// os.Exit(harness.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	tempMu.Lock()
	defer tempMu.Unlock()
	for _, dir := range tempDirs {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, "harness: removing the built binaries:", err)
		}
	}
	tempDirs = nil
	return code
}

func binsIn(dir string) Bins {
	return Bins{
		Meshgw:     filepath.Join(dir, "meshgw"),
		Fakeworker: filepath.Join(dir, "fakeworker"),
		Meshctl:    filepath.Join(dir, "meshctl"),
	}
}

// moduleRoot is the folder holding go.mod, found from this source file.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// ModuleRoot returns the repository's root folder.
func ModuleRoot() string { return moduleRoot() }

// FreePort returns a loopback port, free for TCP and UDP a moment ago, that no earlier call of
// this process returned (loopport.Free), drawn from below the kernel's ephemeral range so that
// a process binding port 0 meanwhile can never take it first.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)
}

// FreePorts returns the first of n consecutive such ports (a script that numbers its ports
// from a base, such as scripts/demo.sh, takes it).
func FreePorts(t testing.TB, n int) int {
	t.Helper()
	base, err := loopport.Free(n)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// Proc is a process started by the harness (proc.Proc: Exited, Wait, Signal, Kill and the
// rest), with what it printed.
type Proc struct {
	*proc.Proc
	URL string // where it serves, once ready

	output logbuf.Buffer
}

// Output returns what the process printed so far (stdout and stderr).
func (p *Proc) Output() string { return p.output.String() }

// Start runs bin with args and env (added to the test's environment), records its output, and
// kills it at the end of the test. onLine, if set, sees each line of stdout.
func Start(t testing.TB, name, bin string, args, env []string, onLine func(string)) *Proc {
	t.Helper()
	p := &Proc{}
	var err error
	p.Proc, err = proc.Start(proc.Spec{Name: name, Path: bin, Args: args, Env: env,
		Stdout: &p.output, Stderr: &p.output, OnLine: onLine})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", name, tail(p.Output(), 60))
		}
	})
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// StartEngine starts a fakeworker with args (besides --host/--port, which the harness sets when
// absent) and waits for its start line.
func StartEngine(t testing.TB, b Bins, name string, args ...string) *Proc {
	t.Helper()
	if !hasFlag(args, "--port") {
		args = append(args, "--port", strconv.Itoa(FreePort(t)))
	}
	if !hasFlag(args, "--host") {
		args = append(args, "--host", "127.0.0.1")
	}
	if !hasFlag(args, "--node-name") {
		args = append(args, "--node-name", name)
	}
	l := proc.NewListening(1)
	p := Start(t, name, b.Fakeworker, args, nil, l.Line)
	urls, err := l.Wait(context.Background(), p.Proc, 15*time.Second)
	switch {
	case errors.Is(err, proc.ErrExited):
		t.Fatalf("%s exited before it listened:\n%s", name, p.Output())
	case err != nil:
		t.Fatalf("%s printed no start line in 15s:\n%s", name, p.Output())
	}
	p.URL = urls[0]
	return p
}

// Gateway is a running meshgw.
type Gateway struct {
	*Proc
	Port, MetricsPort int
}

// StartGateway starts meshgw on a free loopback port with args and waits until /liveness answers.
func StartGateway(t testing.TB, b Bins, name string, args ...string) *Gateway {
	t.Helper()
	g := &Gateway{Port: FreePort(t)}
	args = append([]string{"--host", "127.0.0.1", "--port", strconv.Itoa(g.Port)}, args...)
	if !hasFlag(args, "--prometheus-port") {
		g.MetricsPort = FreePort(t)
		args = append(args, "--prometheus-port", strconv.Itoa(g.MetricsPort))
	}
	// Never the default raft, mesh or gRPC port or the user's state directory: tests run side
	// by side.
	for _, port := range []string{"--raft-port", "--mesh-port", "--rpc-port"} {
		if !hasFlag(args, port) {
			args = append(args, port, "0")
		}
	}
	if !hasFlag(args, "--state-dir") && !hasFlag(args, "--ephemeral") {
		args = append(args, "--state-dir", t.TempDir())
	}
	if !hasFlag(args, "--prometheus-host") {
		args = append(args, "--prometheus-host", "127.0.0.1")
	}
	g.Proc = Start(t, name, b.Meshgw, args, nil, nil)
	g.URL = fmt.Sprintf("http://127.0.0.1:%d", g.Port)
	WaitFor(t, 20*time.Second, name+" answers /liveness", func() bool {
		if g.Exited() {
			t.Fatalf("%s exited:\n%s", name, g.Output())
		}
		return Get(g.URL+"/liveness") == http.StatusOK
	})
	return g
}

var meshLine = regexp.MustCompile(`msg="meshgw started" .*\bmesh=(\S+)`)

// MeshAddr returns the host:port of the gateway's mesh listener, what another gateway's --join
// takes, from its start line (with --log-format text, the default).
func (g *Gateway) MeshAddr(t testing.TB) string {
	t.Helper()
	var addr string
	WaitFor(t, 10*time.Second, g.Name+"'s start line", func() bool {
		if m := meshLine.FindStringSubmatch(g.Output()); m != nil {
			addr = m[1]
			return true
		}
		return false
	})
	return addr
}

// WaitReady waits until the gateway's /readiness answers 200.
func (g *Gateway) WaitReady(t testing.TB, d time.Duration) {
	t.Helper()
	WaitFor(t, d, g.Name+" is ready", func() bool { return Get(g.URL+"/readiness") == http.StatusOK })
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// Get returns the status code of GET url, 0 when no answer came within 2 s.
func Get(url string) int { return proc.Status(url, "") }

// WaitFor polls cond every 20 ms until it holds or d passes, then fails the test naming what.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if proc.Until(context.Background(), d, 20*time.Millisecond, what, cond) != nil {
		t.Fatalf("timed out after %v waiting until %s", d, what)
	}
}
