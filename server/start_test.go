package server

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/meshgw/meshgw/test/logbuf"
)

// takePort holds a free TCP port on 127.0.0.1 for the test and returns its address.
func takePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// portOf is the port of host:port.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// portFlags are the listeners a gateway opens itself (the data plane's is its caller's), each
// with the flag that sets its port and how a test points it at addr.
var portFlags = []struct {
	name, flag string
	take       func(t *testing.T, c *Config, addr string)
}{
	{"probes", "--health-check-port", func(_ *testing.T, c *Config, addr string) { c.ProbeAddr = addr }},
	{"metrics", "--prometheus-port", func(_ *testing.T, c *Config, addr string) { c.MetricsAddr = addr }},
	{"rpc", "--rpc-host/--rpc-port", func(t *testing.T, c *Config, addr string) { c.Cluster.RPCPort = portOf(t, addr) }},
	{"mesh", "--mesh-port", func(t *testing.T, c *Config, addr string) { c.Cluster.MeshPort = portOf(t, addr) }},
	{"raft", "--raft-port", func(_ *testing.T, c *Config, addr string) { c.Raft.BindAddr = addr }},
}

// startOnTakenPort starts a gateway of cfg, whose port of flag is taken, and returns Start's
// error; it fails the test if Start succeeds.
func startOnTakenPort(t *testing.T, cfg Config) error {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start()
	if err == nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = s.Run(ctx)
		t.Fatal("Start succeeded on a port in use")
	}
	return err
}

// TestPortInUseFailsBeforeJoining: a gateway started with --join whose port is in use, any of
// them, fails before it joined the mesh or started raft: it never was a member its peers list
// (alive, then dead) and that the raft leader adds as a non-voter for the dead voter's grace,
// nor a raft server of its own.
func TestPortInUseFailsBeforeJoining(t *testing.T) {
	seed := startGateway(t, func(c *Config) { c.NodeID = "gw-1" })
	for _, pf := range portFlags {
		t.Run(pf.name, func(t *testing.T) {
			logs := &logbuf.Buffer{}
			cfg := testConfig(t, logs)
			cfg.NodeID = "gw-8-" + pf.name
			cfg.Cluster.Join = []string{seed.MeshAddr()}
			pf.take(t, &cfg, takePort(t))
			if err := startOnTakenPort(t, cfg); err == nil {
				return
			}
			for _, line := range []string{`msg="mesh joined"`, `msg="raft started"`} {
				if got := logs.Lines(line); len(got) != 0 {
					t.Errorf("%s before failing on its port in use: %q", line, got)
				}
			}
			if m, ok := seed.cl.member(cfg.NodeID); ok {
				t.Errorf("the seed lists %s (%s): it joined before failing", cfg.NodeID, m.Status)
			}
			if t.Failed() {
				t.Logf("logs:\n%s", logs.String())
			}
		})
	}
}

// TestPortInUseNamesItsFlag: whichever port is in use, Start's error names its flag and the
// address, as "cannot listen on --FLAG ADDR: ...", and carries the system's reason.
func TestPortInUseNamesItsFlag(t *testing.T) {
	for _, pf := range portFlags {
		t.Run(pf.name, func(t *testing.T) {
			cfg := testConfig(t, &logbuf.Buffer{})
			busy := takePort(t)
			pf.take(t, &cfg, busy)
			err := startOnTakenPort(t, cfg)
			want := "cannot listen on " + pf.flag + " " + busy + ": "
			if !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "address already in use") {
				t.Errorf("Start: %q, want %q followed by the reason, address already in use", err, want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the error spans lines: %q", err)
			}
		})
	}
}
