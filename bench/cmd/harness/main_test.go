package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/bench"
	"github.com/meshgw/meshgw/test/harness"
	"github.com/meshgw/meshgw/test/wan"
)

func TestParseFlagsQuick(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		env          string
		wantRounds   int
		wantStreams  int // rounds of the streaming rows
		wantDuration time.Duration
		wantHealth   bool
	}{
		{name: "full run leaves defaults to bench.Run", wantRounds: 0, wantDuration: 0, wantHealth: true},
		{name: "-quick", args: []string{"-quick"}, wantRounds: 1, wantStreams: 1, wantDuration: 3 * time.Second, wantHealth: true},
		{name: "BENCH_QUICK=1", env: "1", wantRounds: 1, wantStreams: 1, wantDuration: 3 * time.Second, wantHealth: true},
		{name: "quick keeps what is set", args: []string{"-quick", "-rounds", "2", "-stream-rounds", "3", "-duration", "5s"}, wantRounds: 2,
			wantStreams: 3, wantDuration: 5 * time.Second, wantHealth: true},
		{name: "health off", args: []string{"-health=false"}, wantHealth: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("BENCH_QUICK", tt.env)
			t.Setenv("REPORT", "/tmp/x.json")
			o, report, err := parseFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if o.Rounds != tt.wantRounds || o.StreamRounds != tt.wantStreams || o.Duration != tt.wantDuration || (o.Health != nil) != tt.wantHealth || report != "/tmp/x.json" {
				t.Errorf("rounds %d, stream rounds %d, duration %v, health %v, report %q", o.Rounds, o.StreamRounds, o.Duration, o.Health != nil, report)
			}
		})
	}
	t.Setenv("BENCH_QUICK", "")
	o, _, err := parseFlags([]string{"-quick"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if m := o.Mesh; m == nil || len(m.BulletinPeers) != 1 || m.BulletinPeers[0] != 3 || m.BulletinTrials != 20 || m.BulletinWorkers != 1_000 {
		t.Errorf("quick mesh options %+v: want bulletins at 3 peers only, 20 trials, 1,000 workers", o.Mesh)
	}
	if c := o.CacheSync; c == nil || c.Requests != 100 {
		t.Errorf("quick cachesync options %+v: want 100 requests", o.CacheSync)
	}
	if o, _, _ := parseFlags(nil, io.Discard); o.CacheSync == nil || o.CacheSync.Requests != 0 {
		t.Errorf("cachesync options %+v: want the section, its defaults left to bench", o.CacheSync)
	}
	if o, _, _ := parseFlags([]string{"-cachesync=false"}, io.Discard); o.CacheSync != nil {
		t.Error("-cachesync=false kept the section")
	}
	if _, _, err := parseFlags([]string{"-nope"}, io.Discard); err == nil {
		t.Error("unknown flag accepted")
	}
}

var fourPolicies = []string{"round_robin", "prefix_hash", "cache_aware --cache-scope local", "cache_aware"}

func TestParseFlagsRouting(t *testing.T) {
	t.Setenv("BENCH_QUICK", "")
	tests := []struct {
		name         string
		args         []string
		wantPolicies []string
		wantGateways []int
		wantSessions int
		wantFlags    []string
	}{
		// Issue 28's four policies, so that make bench gives the table its targets are read from.
		{"defaults are left to bench", nil, fourPolicies, nil, 0, nil},
		{"quick: the two the targets compare", []string{"-quick"}, []string{"round_robin", "cache_aware"}, []int{1, 3}, 40, nil},
		{"policies with their own flags", []string{"-routing-policies", "round_robin, cache_aware --cache-scope local,cache_aware",
			"-routing-gateways", "1,5", "-routing-gateway-flags", "--a 1 --b", "-routing-cache-answers"},
			[]string{"round_robin", "cache_aware --cache-scope local", "cache_aware"}, []int{1, 5}, 0, []string{"--a", "1", "--b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, err := parseFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			r := o.Routing
			if r == nil {
				t.Fatal("no routing section")
			}
			if diff := cmp.Diff(tt.wantPolicies, r.Policies); diff != "" {
				t.Errorf("policies (-want +got):\n%s", diff)
			}
			if r.CacheAnswers != slices.Contains(tt.args, "-routing-cache-answers") {
				t.Errorf("CacheAnswers %v", r.CacheAnswers)
			}
			wantOpen := float64(bench.DefaultOpenLoopRate) // make bench runs the open loop too; a quick run does not
			if slices.Contains(tt.args, "-quick") {
				wantOpen = 0
			}
			if r.OpenLoopRate != wantOpen {
				t.Errorf("open loop rate %v, want %v", r.OpenLoopRate, wantOpen)
			}
			if !slices.Equal(tt.wantGateways, r.Gateways) || r.Workload.Sessions != tt.wantSessions || !slices.Equal(tt.wantFlags, r.GatewayFlags) {
				t.Errorf("gateways %v, sessions %d, flags %q", r.Gateways, r.Workload.Sessions, r.GatewayFlags)
			}
		})
	}
	for _, bad := range []string{"0", "x", "1,-3"} {
		if _, _, err := parseFlags([]string{"-routing-gateways", bad}, io.Discard); err == nil {
			t.Errorf("-routing-gateways %q accepted", bad)
		}
	}
	for _, args := range [][]string{{"-routing-open-loop-rate", "30"}, {"-quick", "-routing-open-loop-rate", "30"}, {"-routing-open-loop-rate", "0"}} {
		want, _ := strconv.ParseFloat(args[len(args)-1], 64)
		if o, _, err := parseFlags(args, io.Discard); err != nil || o.Routing.OpenLoopRate != want {
			t.Errorf("%q: %v", args, err)
		}
	}
	for _, bad := range []string{"-1", "NaN", "+Inf"} {
		if _, _, err := parseFlags([]string{"-routing-open-loop-rate", bad}, io.Discard); err == nil {
			t.Errorf("-routing-open-loop-rate %q accepted", bad)
		}
	}
	// One prefill lane by default, as on one GPU; 0 asks for none, which RoutingOptions spells -1.
	for _, tt := range []struct {
		args []string
		want int
	}{{nil, 1}, {[]string{"-routing-prefill-lanes", "0"}, -1}, {[]string{"-routing-prefill-lanes", "2"}, 2}} {
		if o, _, err := parseFlags(tt.args, io.Discard); err != nil || o.Routing.PrefillLanes != tt.want {
			t.Errorf("%q: %v, lanes %d, want %d", tt.args, err, o.Routing.PrefillLanes, tt.want)
		}
	}
	if _, _, err := parseFlags([]string{"-routing-prefill-lanes", "-1"}, io.Discard); err == nil {
		t.Error("-routing-prefill-lanes -1 accepted")
	}
	if o, _, _ := parseFlags([]string{"-routing=false"}, io.Discard); o.Routing != nil {
		t.Error("-routing=false kept the section")
	}
}

// TestRoutingQuick runs the routing section's short mode with real meshgw and fakeworker
// processes, as make bench-quick does, and checks that its report and table are well formed
// (not its figures, which depend on the machine).
func TestRoutingQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateways and engines for about 40 s")
	}
	var rep struct {
		Routing bench.RoutingResult `json:"routing"`
	}
	// A quick run has no open loop unless asked: this one asks, so that it runs end to end.
	out := runQuick(t, &rep, "-cachesync=false", "-wan=false", "-routing-open-loop-rate", "40")
	rr := rep.Routing
	if rr.Status != "measured" || rr.Engines != 8 || len(rr.Rows) != 4 {
		t.Fatalf("routing section: status %q, %d engines, %d rows; want measured, 8, 4", rr.Status, rr.Engines, len(rr.Rows))
	}
	if ol := rr.OpenLoop; ol == nil || ol.SessionRate != 40 || ol.Gateways != 3 || len(ol.Rows) != 2 ||
		ol.Rows[0].Policy != "round_robin" || ol.Rows[1].Policy != "cache_aware" {
		t.Fatalf("open loop %+v: want round_robin and cache_aware at 3 gateways, 40 sessions/s", ol)
	}
	if !strings.Contains(out, "an open loop beside it: the same sessions starting at 40 a second") {
		t.Errorf("the table does not introduce the open loop:\n%s", out)
	}
	want := rr.Workload.Sessions * rr.Workload.Turns
	for _, r := range append(rr.Rows, rr.OpenLoop.Rows...) {
		sum := int64(0)
		for _, n := range r.EngineRequests {
			sum += n
		}
		switch {
		case r.Error != "" || r.FirstError != "":
			t.Errorf("%s at %d: %s%s", r.Policy, r.Gateways, r.Error, r.FirstError)
		case r.Requests != want || r.Failed+r.Unsent != 0 || len(r.EngineRequests) != 8 || sum != int64(want):
			t.Errorf("%s at %d: %d answered, %d failed, %d unsent, engines %v; want %d answered", r.Policy, r.Gateways,
				r.Requests, r.Failed, r.Unsent, r.EngineRequests, want)
		case !inUnit(r.CachedShare) || !inUnit(r.FollowUpShare) || !inUnit(r.EngineCachedShare) || r.RequestsCoV < 0:
			t.Errorf("%s at %d: shares %v, %v, %v, CoV %v", r.Policy, r.Gateways, r.CachedShare, r.FollowUpShare, r.EngineCachedShare, r.RequestsCoV)
		case r.TTFTP50Ms <= 0 || r.TTFTP99Ms < r.TTFTP50Ms || r.RequestsPerSec <= 0:
			t.Errorf("%s at %d: TTFT p50 %v, p99 %v, %v req/s", r.Policy, r.Gateways, r.TTFTP50Ms, r.TTFTP99Ms, r.RequestsPerSec)
		}
		row := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(r.Policy) + `\s+` + strconv.Itoa(r.Gateways) + `\s+\d\.\d\d\s+\d\.\d\d \(\d+/\d+\)`)
		if !row.MatchString(out) {
			t.Errorf("the table has no row for %s at %d gateways:\n%s", r.Policy, r.Gateways, out)
		}
	}
}

func inUnit(v float64) bool { return v >= 0 && v <= 1 }

func TestParseFlagsWAN(t *testing.T) {
	t.Setenv("BENCH_QUICK", "")
	o, _, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if w := o.WAN; w == nil || w.Requests != 0 || w.SpillRequests != 0 || w.NoFailover || w.FakeworkerBin != "bin/fakeworker" {
		t.Errorf("wan options %+v: want the section on, its defaults left to bench, with the routing section's fakeworker", o.WAN)
	}
	o, _, err = parseFlags([]string{"-quick", "-wan-delay", "25ms", "-wan-failover=false", "-fakeworker", "/x/fw"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if w := o.WAN; w == nil || w.SpillRequests != 300 || w.Writes != 10 || w.Trials != 3 || w.Requests != 0 || w.Delay != 25*time.Millisecond ||
		!w.NoFailover || w.FakeworkerBin != "/x/fw" {
		t.Errorf("quick wan options %+v", o.WAN)
	}
	if o, _, _ := parseFlags([]string{"-quick"}, io.Discard); o.WAN == nil || !o.WAN.NoFailover {
		t.Errorf("quick wan options %+v: want the failover run left out", o.WAN)
	}
	if o, _, _ := parseFlags([]string{"-quick", "-wan-failover"}, io.Discard); o.WAN == nil || o.WAN.NoFailover {
		t.Errorf("quick wan options with -wan-failover %+v: want the failover run", o.WAN)
	}
	if o, _, _ := parseFlags([]string{"-wan=false"}, io.Discard); o.WAN != nil {
		t.Error("-wan=false kept the section")
	}
	for _, bad := range [][]string{{"-wan-delay", "-5ms"}, {"-wan-requests", "-1"}, {"-wan-writes", "-2"}} {
		var errs bytes.Buffer
		if _, _, err := parseFlags(bad, &errs); err == nil || strings.Count(strings.TrimSpace(errs.String()), "\n") != 0 {
			t.Errorf("%v: error %v, output %q; want an error in one line", bad, err, errs.String())
		}
	}
}

// TestWANQuick runs the wan section's short mode (without the failover run, about 50 s) with
// real meshgw and fakeworker processes over a simulated WAN, as make bench-quick does as root,
// and checks its report and table: what locality and the fleet acknowledgement promise (no
// chat crosses regions while local workers are healthy, none is lost, none reaches a worker
// after its disable returned), not the machine-dependent figures.
func TestWANQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 regions of gateways and engines for about 30 s")
	}
	if ok, why := wan.Usable(); !ok {
		t.Skip("no simulated WAN here: " + why)
	}
	var rep struct {
		WAN bench.WANResult `json:"wan"`
	}
	out := runQuick(t, &rep, "-routing=false", "-cachesync=false", "-wan-failover=false")
	w := rep.WAN
	if w.Status != "measured" || len(w.Errors) > 0 || w.Local == nil || len(w.Spill) != 3 || len(w.FleetAck) != 2 || w.Bulletin == nil || w.CacheIndex == nil {
		t.Fatalf("wan section: %+v\nstdout:\n%s", w, out)
	}
	if l := w.Link; l == nil || l.P50Ms < 2*w.DelayMs {
		t.Errorf("link round trip %+v; want at least twice the one-way delay of %v ms", l, w.DelayMs)
	}
	if l := w.Local; l.Requests != 1000 || l.Crossed != 0 || l.Failed != 0 || l.GatewayP50Ms <= 0 || l.DirectP50Ms <= 0 {
		t.Errorf("healthy run: %+v; want 1000 chats, none crossed or failed", l)
	}
	for _, s := range w.Spill {
		if s.Requests != 300 || s.Failed != 0 || s.Requests != s.ByRegion["eu"]+s.Crossed {
			t.Errorf("%s: %+v; want 300 chats, none lost, the crossed ones served outside eu", s.Broken, s)
		}
	}
	if s := w.Spill[1]; s.Crossed != s.Requests {
		t.Errorf("both of eu's engines killed: %d of %d crossed; want all", s.Crossed, s.Requests)
	}
	for _, a := range w.FleetAck {
		if a.Writes != 10 || a.LoadedWrites != 10 || a.NotAllAcked != 0 || a.Probes != 30 || a.ReachedAfter != 0 || a.P50Ms <= 0 || a.LoadAfter == 0 || a.LoadReachedAfter != 0 {
			t.Errorf("writes through %s: %+v; want 10 and 10 acknowledged by all, 30 probes and chats of the load while disabled, none reaching the worker", a.Through, a)
		}
	}
	if w.Bulletin.Lost != 0 || w.Bulletin.Samples != 12 || w.CacheIndex.Lost != 0 || w.CacheIndex.Samples != 6 {
		t.Errorf("propagation: bulletins %+v, cache index %+v; want 12 and 6 samples, none lost", w.Bulletin, w.CacheIndex)
	}
	for _, line := range []string{"wan: local workers healthy: 1000 chats", "WAN: chats crossing regions, local workers healthy", "wan: bulletin propagation from"} {
		if !strings.Contains(out, line) {
			t.Errorf("the table has no %q:\n%s", line, out)
		}
	}
}

// runQuick runs the harness in its quick mode with the proxy, stream, health, mesh and control
// sections off, the binaries built for the test, and args; it decodes the JSON report into rep
// and returns what the harness printed.
func runQuick(t *testing.T, rep any, args ...string) string {
	t.Helper()
	bins := harness.Build(t)
	report := filepath.Join(t.TempDir(), "report.json")
	var out, errs bytes.Buffer
	args = append([]string{"-quick", "-no-proxy", "-no-stream", "-health=false", "-mesh=false", "-control=false"}, args...)
	args = append(args, "-meshgw", bins.Meshgw, "-fakeworker", bins.Fakeworker, "-report", report)
	if code := run(context.Background(), args, &out, &errs); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, rep); err != nil {
		t.Fatalf("report: %v", err)
	}
	return out.String()
}
