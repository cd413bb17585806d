package bench

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/bench/routeload"
)

func TestCoV(t *testing.T) {
	tests := []struct {
		v    []int64
		want float64
	}{
		{nil, 0},
		{[]int64{0, 0}, 0},
		{[]int64{5, 5, 5, 5}, 0},
		{[]int64{0, 10}, 1},
		{[]int64{2, 4, 4, 4, 5, 5, 7, 9}, 0.4}, // mean 5, standard deviation 2
	}
	for _, tt := range tests {
		if got := cov(tt.v); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("cov(%v) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

func TestSlug(t *testing.T) {
	if got := slug("cache_aware --cache-scope local"); got != "cache-aware-cache-scope-local" {
		t.Errorf("slug = %q", got)
	}
}

func TestRoutingTable(t *testing.T) {
	res := RoutingResult{What: "w", GatewayFlags: []string{"--x"}, Rows: []RoutingRow{
		{Policy: "round_robin", Gateways: 3, Result: routeload.Result{Requests: 10, CachedShare: 0.5, FollowUpShare: 0.25,
			FollowUps: 8, FollowUpsCached: 2, TTFTP50Ms: 12.4, TTFTP99Ms: 99.6, RequestsPerSec: 41}, RequestsCoV: 0.123,
			EngineQueued: 7, EngineWaitMs: 30.4, EngineLaneWaitMs: 9.6, EnginePrefillMs: 20.6, EngineSlotMs: 61},
		{Policy: "cache_aware", Gateways: 5, Error: "meshgw exited: exit status 2"},
	}}
	var b bytes.Buffer
	res.PrintTable(&b)
	for _, want := range []string{
		"routing: w routing:",
		"every gateway also ran with --x",
		"round_robin 3 0.50 0.25 (2/8) 12 100 41 0.12 7 30 10 21 61 0 0.00",
		"cache_aware 5 — — — — — — — — — — — — —",
		"cache_aware at 5 gateways: meshgw exited: exit status 2",
	} {
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "open loop") {
		t.Errorf("a table without an open loop mentions one:\n%s", b.String())
	}

	res.OpenLoop = &RoutingOpenLoop{SessionRate: 36, Gateways: 5, Rows: []RoutingRow{
		{Policy: "round_robin", Gateways: 5, Result: routeload.Result{Requests: 10, FollowUps: 8, TTFTP50Ms: 76, TTFTP99Ms: 263, RequestsPerSec: 188}},
		{Policy: "cache_aware", Gateways: 5, Error: "5 gateways did not form one cluster"}}}
	b.Reset()
	res.PrintTable(&b)
	flat := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"round_robin 3 0.50 0.25 (2/8) 12 100 41", // the closed loop's rows first
		"an open loop beside it: the same sessions starting at 36 a second (Poisson arrivals), through 5 gateways",
		"round_robin 5 0.00 0.00 (0/8) 76 263 188",
		"cache_aware at 5 gateways: 5 gateways did not form one cluster",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("table with an open loop lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Index(flat, "open loop beside it") < strings.Index(flat, "round_robin 3") {
		t.Errorf("the open loop comes before the closed loop's rows:\n%s", b.String())
	}
}

// TestRoutingEngineArgs: the engines get the standard compute model, one prefill lane unless
// told otherwise (-1: none), and cache answers only when asked (-routing-cache-answers).
func TestRoutingEngineArgs(t *testing.T) {
	for _, tt := range []struct {
		answers   bool
		lanes     int
		wantLanes int
	}{{false, 0, 1}, {true, 0, 1}, {false, -1, 0}, {false, 3, 3}} {
		r := &RoutingOptions{CacheAnswers: tt.answers, PrefillLanes: tt.lanes}
		r.setDefaults()
		got := strings.Join(routingEngineArgs(r, "e1", 9001), " ")
		want := fmt.Sprintf("--port 9001 --node-name e1 --log-level warn --slots 4 --cache-blocks 1024 "+
			"--prefill-us-per-token 200 --decode-us-per-token 2000 --cache-answers=%v --prefill-lanes %d "+
			"--faults {\"stream_chunks\":20}", tt.answers, tt.wantLanes)
		if !strings.HasSuffix(got, want) {
			t.Errorf("args %q, want them to end %q", got, want)
		}
	}
}

// TestRoutingGoals: issue 28's targets are read at the largest gateway count with both
// policies, cache_aware against round_robin and against its own row at 1 gateway; a verdict
// only at 5 gateways or more; a failed row gives no goal.
func TestRoutingGoals(t *testing.T) {
	rowOf := func(policy string, g, followUps int, p50, p99, rps, cov float64) RoutingRow {
		return RoutingRow{Policy: policy, Gateways: g, RequestsCoV: cov, Result: routeload.Result{Requests: 1800,
			FollowUps: 1500, FollowUpsCached: followUps, FollowUpShare: float64(followUps) / 1500,
			TTFTP50Ms: p50, TTFTP99Ms: p99, RequestsPerSec: rps}}
	}
	full := RoutingResult{Rows: []RoutingRow{
		rowOf("round_robin", 1, 300, 300, 600, 250, 0),
		rowOf("cache_aware", 1, 1480, 150, 280, 450, 0.05),
		rowOf("round_robin", 5, 300, 300, 650, 245, 0.01),
		rowOf("cache_aware --cache-scope local", 5, 1000, 180, 700, 300, 0.09),
		rowOf("cache_aware", 5, 1447, 162, 269, 435, 0.05),
	}}
	verdicts := func(gs []Goal) string {
		var b strings.Builder
		for _, g := range gs {
			v := "-"
			if g.Met != nil {
				v = fmt.Sprint(*g.Met)
			}
			fmt.Fprintf(&b, "%s=%s; ", g.Name, v)
		}
		return b.String()
	}
	want := "cache_aware follow-ups cached, 5 gateways=true; cache_aware follow-ups cached ÷ 1 gateway's, 5 gateways=true; " +
		"cache_aware TTFT p50 ÷ round_robin's, 5 gateways=false; cache_aware TTFT p99, 5 gateways=true; " +
		"cache_aware req/s ÷ round_robin's, 5 gateways=true; cache_aware CoV of requests per engine, 5 gateways=true; "
	if got := verdicts(routingGoals(full)); got != want {
		t.Errorf("goals:\n%s\nwant\n%s", got, want)
	}

	quick := RoutingResult{Rows: []RoutingRow{rowOf("round_robin", 3, 30, 100, 200, 50, 0), rowOf("cache_aware", 3, 30, 40, 90, 90, 0.4)}}
	for _, g := range routingGoals(quick) {
		if g.Met != nil || !strings.HasSuffix(g.Name, "3 gateways") {
			t.Errorf("a quick run's %q got a verdict or the wrong count", g.Name)
		}
	}

	open := full
	open.OpenLoop = &RoutingOpenLoop{SessionRate: 30, Gateways: 5, Rows: []RoutingRow{
		rowOf("round_robin", 5, 300, 70, 270, 160, 0.01), rowOf("cache_aware", 5, 1500, 28, 120, 165, 0.5)}}
	gs := routingGoals(open)
	if got := verdicts(gs); !strings.HasPrefix(got, want) {
		t.Errorf("with an open loop, the closed loop's goals changed:\n%s\nwant first\n%s", got, want)
	}
	var names []string
	for _, g := range gs[len(routingGoals(full)):] {
		names = append(names, strings.TrimSuffix(g.Name, ", 5 gateways, open loop of 30 sessions/s"))
		if v := verdict(g); v != "no verdict" {
			t.Errorf("the open loop's %q printed as %q, want no verdict: it was measured, off the goals' workload", g.Name, v)
		}
	}
	if diff := cmp.Diff([]string{"cache_aware follow-ups cached", "cache_aware TTFT p50 ÷ round_robin's", "cache_aware TTFT p99"}, names); diff != "" {
		t.Errorf("the open loop's goal rows (-want +got):\n%s", diff)
	}

	failed := full
	failed.Rows = append([]RoutingRow(nil), full.Rows...)
	failed.Rows[4].Error = "5 gateways did not form one cluster"
	if got := verdicts(routingGoals(failed)); !strings.Contains(got, "1 gateway") || strings.Contains(got, "5 gateways") {
		t.Errorf("with the 5-gateway cache_aware row failed, the goals were read at: %s", got)
	}
	if got := verdicts(computeGoals(&Report{Routing: full})); !strings.Contains(got, want) {
		t.Errorf("make bench's goals leave out the routing section's: %s", got)
	}
	if gs := routingGoals(notMeasured("skipped")); gs != nil {
		t.Errorf("an unmeasured section gave goals %v", gs)
	}
}

// TestLanesWhat: the section's description names the engines' prefill model.
func TestLanesWhat(t *testing.T) {
	for lanes, want := range map[int]string{-1: "every admitted prompt prefilled at once",
		1: "one prompt prefilled at a time (as one GPU's forward pass)", 2: "2 prompts prefilled at once"} {
		if got := lanesWhat(lanes); got != want {
			t.Errorf("lanesWhat(%d) = %q, want %q", lanes, got, want)
		}
	}
}
