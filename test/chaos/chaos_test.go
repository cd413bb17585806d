package chaos_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/chaos"
	"github.com/meshgw/meshgw/test/harness"
	"github.com/meshgw/meshgw/test/proc"
	"github.com/meshgw/meshgw/test/wan"
)

// TestChaosShort is the short mode of the chaos test that make test runs: seed 7, 45 s of
// faults on 3 gateways and 3 engines (isolated in network namespaces when root with ip and
// iptables), through the meshgw-chaos command as a user runs it; every invariant must hold.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process chaos run")
	}
	rep := runChaos(t, 3*time.Minute, "--seed", "7", "--duration", "45s", "--nodes", "3", "--engines", "3")
	faults := 0
	for _, n := range rep.Faults {
		faults += n
	}
	if faults == 0 || rep.Requests.OK == 0 {
		t.Errorf("the run injected %d faults and served %d requests", faults, rep.Requests.OK)
	}
	for _, name := range []string{"linearizable", "no_lost_ack", "no_disabled_routing", "single_owner", "owner_within_bound", "fail_static", "no_goroutine_leak"} {
		r, ok := rep.Invariants[name]
		if !ok || !r.OK {
			t.Errorf("%s: %+v", name, r)
		}
	}
}

// TestChaosWANShort is the short mode over a simulated WAN: 3 regions 25 ms apart one way, 3
// gateways and 3 engines spread over them, 20 s of region cuts (5 s each) and engine flaps
// through meshgw-chaos --regions. Every invariant must hold, the cuts must be measured, and
// their writes must fail with the no-quorum answer. It needs root (test/wan) and skips
// with the reason elsewhere.
func TestChaosWANShort(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process chaos run")
	}
	if ok, why := wan.Usable(); !ok {
		t.Skip("no simulated WAN here: " + why)
	}
	rep := runChaos(t, 2*time.Minute, "--seed", "7", "--duration", "20s", "--nodes", "3", "--engines", "3",
		"--regions", "3", "--wan-delay", "25ms", "--cut-hold", "5s", "--faults", "partition-one,engine-flap")
	if len(rep.Regions) != 3 || rep.Faults["partition-one"] == 0 || len(rep.RegionCuts) == 0 {
		t.Fatalf("regions %v, %d region cuts, %d measured", rep.Regions, rep.Faults["partition-one"], len(rep.RegionCuts))
	}
	if _, ok := rep.LostByCause["region_cut"]; !ok {
		t.Errorf("lost_by_cause has no region_cut: %v", rep.LostByCause)
	}
	writes, noQuorum, served := 0, 0, 0
	for _, c := range rep.RegionCuts {
		writes, noQuorum, served = writes+c.Writes, noQuorum+c.NoQuorum, served+c.ServedLocal
		// Fail-static: the requests the region's own healthy workers were there for (not those
		// that spilled away because the workload had disabled them, nor those an engine flap
		// failed) are served, cut or not.
		if home := c.ServedLocal + c.Requests.GatewayLost - c.LostAway - c.LostFaulted; home > 0 && c.HomeShare < 0.95 {
			t.Errorf("region cut of %s: its own workers served %.4f of %d requests", c.Region, c.HomeShare, home)
		}
	}
	if served == 0 {
		t.Errorf("no cut region served a request from its own workers: %+v", rep.RegionCuts)
	}
	if writes == 0 || noQuorum == 0 {
		t.Errorf("%d writes through cut regions, %d answered no quorum", writes, noQuorum)
	}
	for name, r := range rep.Invariants {
		if !r.OK {
			t.Errorf("%s: %s", name, r.Detail)
		}
	}
}

// runChaos runs the meshgw-chaos command (built next to meshgw when missing) with args, bounded
// by within, and returns its report; a run that fails or writes no report fails t.
func runChaos(t *testing.T, within time.Duration, args ...string) chaos.Report {
	t.Helper()
	b := harness.Build(t)
	dir := filepath.Dir(b.Meshgw)
	bin := filepath.Join(dir, "meshgw-chaos")
	if _, err := os.Stat(bin); err != nil {
		if err := proc.Build(harness.ModuleRoot(), dir, "./cmd/meshgw-chaos"); err != nil {
			t.Fatal(err)
		}
	}
	report := filepath.Join(t.TempDir(), "report.json")
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--report", report, "--bin", dir)...)
	// On a timeout, SIGINT first: the run heals, kills its processes and removes its namespaces.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("meshgw-chaos output:\n%s", out)
	if err != nil {
		t.Fatalf("meshgw-chaos: %v", err)
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep chaos.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, raw)
	}
	return rep
}
