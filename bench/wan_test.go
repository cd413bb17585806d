package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLocalityCross(t *testing.T) {
	tests := []struct {
		routable, total int
		want            float64
	}{
		{2, 2, 0},             // all routable: everything stays
		{1, 2, 0.3},           // issue 29: min(1, 1/2 × 1.4) = 0.7 stays
		{0, 2, 1},             // none routable: everything goes
		{5, 7, 0},             // 5/7 × 1.4 = 1: the edge where the region keeps all
		{4, 7, 0.2},           // 4/7 × 1.4 = 0.8
		{0, 0, 1},             // no local worker at all
		{1, 1, 0},             // one disabled of two: not counted, the other keeps all
		{3, 10, 0.58},         // 0.42 stays
		{10, 10, 0},           // healthy
		{9, 10, 0},            // 1.26, capped
		{7, 10, 0.02},         // 0.98 stays
		{1, 10, 0.86},         // 0.14 stays
		{2, 3, 1 - 2.0/3*1.4}, // 0.933 stays
		{1, 3, 0.5333},        // 0.4667 stays
	}
	for _, tt := range tests {
		if got := localityCross(tt.routable, tt.total, 1.4); math.Abs(got-tt.want) > 1e-4 {
			t.Errorf("localityCross(%d, %d, 1.4) = %.4f; want %.4f", tt.routable, tt.total, got, tt.want)
		}
	}
}

func TestSumMetric(t *testing.T) {
	page := strings.Join([]string{
		"# HELP meshgw_cache_index_bytes Bytes of routing text.",
		"# TYPE meshgw_cache_index_bytes gauge",
		`meshgw_cache_index_bytes{model="fake-model"} 2048`,
		`meshgw_cache_index_bytes{model="other",note="a } in a label"} 1e3`,
		"meshgw_cache_index_bytes_total 99999",
		`meshgw_cache_index_bytesx{model="x"} 5`,
		"meshgw_cache_index_bytes 7",
		"",
	}, "\n")
	if got := sumMetric(page, "meshgw_cache_index_bytes"); got != 3055 {
		t.Errorf("sum = %v; want 3055 (2048 + 1000 + 7, the look-alike names left out)", got)
	}
	if got := sumMetric(page, "meshgw_absent"); got != 0 {
		t.Errorf("an absent metric sums to %v", got)
	}
}

func TestMovedFrom(t *testing.T) {
	before := map[string]uint64{"a": 3, "b": 5}
	tests := []struct {
		name   string
		ws     []wanWorker
		owners []string
		ok     bool
	}{
		{"all moved to live gateways at a higher epoch", []wanWorker{{URL: "a", Owner: "gw-eu", Epoch: 4}, {URL: "b", Owner: "gw-ap", Epoch: 6},
			{URL: "c", Owner: "gw-us", Epoch: 1}}, []string{"gw-ap", "gw-eu"}, true},
		{"one still with the dead owner", []wanWorker{{URL: "a", Owner: "gw-eu", Epoch: 4}, {URL: "b", Owner: "gw-us", Epoch: 5}}, nil, false},
		{"owner changed but the epoch did not", []wanWorker{{URL: "a", Owner: "gw-eu", Epoch: 3}, {URL: "b", Owner: "gw-ap", Epoch: 6}}, nil, false},
		{"one missing", []wanWorker{{URL: "a", Owner: "gw-eu", Epoch: 4}}, nil, false},
		{"no owner", []wanWorker{{URL: "a", Owner: "", Epoch: 4}, {URL: "b", Owner: "gw-ap", Epoch: 6}}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owners, ok := movedFrom(tt.ws, before, "gw-us")
			if ok != tt.ok || (ok && !slices.Equal(owners, tt.owners)) {
				t.Errorf("movedFrom = %v, %t; want %v, %t", owners, ok, tt.owners, tt.ok)
			}
		})
	}
}

func TestWANGoals(t *testing.T) {
	full := WANResult{Status: "measured", DelayMs: 50,
		Local: &WANLocal{Requests: 1000, GatewayP50Ms: 0.5, DirectP50Ms: 0.3},
		Spill: []WANSpill{
			{Kind: "killed", LocalRoutable: 1, LocalTotal: 2, Requests: 1000, Crossed: 340, CrossedShare: 0.34, PredictedShare: 0.3},
			{Kind: "killed", LocalRoutable: 0, LocalTotal: 2, Requests: 1000, Crossed: 1000, CrossedShare: 1, PredictedShare: 1},
			{Kind: "disabled", LocalRoutable: 1, LocalTotal: 1, Requests: 1000, Crossed: 0, PredictedShare: 0},
		},
		FleetAck: []*WANWrites{{Through: "gw-eu", Leader: true, Writes: 50, P99Ms: 290, Probes: 150, LoadAfter: 400},
			{Through: "gw-ap", Writes: 50, P99Ms: 310, Probes: 150, LoadAfter: 400, ReachedAfter: 1}},
	}
	verdicts := func(r WANResult) map[string]string {
		out := map[string]string{}
		for _, g := range wanGoals(r) {
			v := "none"
			if g.Met != nil {
				v = map[bool]string{true: "met", false: "not met"}[*g.Met]
			}
			out[g.Name] = v
		}
		return out
	}
	want := map[string]string{
		"WAN: chats crossing regions, local workers healthy":                                            "met",
		"WAN: cross-region share, 1 of 2 local engines killed":                                          "met", // 4 points off
		"WAN: all 2 local workers killed":                                                               "met",
		"WAN: cross-region share, a local worker disabled, 1 left":                                      "met",
		"WAN: fleet-acknowledged disable p99, 3 regions, through the leader's region":                   "met",
		"WAN: chats reaching the worker after its disable returned, through the leader's region":        "met",
		"WAN: fleet-acknowledged disable p99, 3 regions, through another region (forwarded)":            "not met",
		"WAN: chats reaching the worker after its disable returned, through another region (forwarded)": "not met",
	}
	got := verdicts(full)
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%q: %q; want %q (all: %v)", name, got[name], v, got)
		}
	}

	// A crossing, a share 6 points off, a lost chat, a chat of the load reaching the worker:
	// not met.
	bad := full
	bad.FleetAck = []*WANWrites{{Through: "gw-eu", Leader: true, Writes: 50, P99Ms: 290, Probes: 150, LoadAfter: 400, LoadReachedAfter: 1}}
	bad.Local = &WANLocal{Requests: 1000, Crossed: 1}
	bad.Spill = []WANSpill{{Kind: "killed", LocalRoutable: 1, LocalTotal: 2, Requests: 1000, CrossedShare: 0.24, PredictedShare: 0.3},
		{Kind: "killed", LocalTotal: 2, Requests: 1000, Crossed: 999, Failed: 1}}
	got = verdicts(bad)
	for _, name := range []string{"WAN: chats crossing regions, local workers healthy", "WAN: cross-region share, 1 of 2 local engines killed",
		"WAN: all 2 local workers killed", "WAN: chats reaching the worker after its disable returned, through the leader's region"} {
		if got[name] != "not met" {
			t.Errorf("%q: %q; want not met", name, got[name])
		}
	}

	// A quick run (fewer chats) or another delay says nothing of the shares and latencies.
	quick := full
	quick.DelayMs = 25
	quick.Local = &WANLocal{Requests: 300}
	quick.Spill = slices.Clone(full.Spill[:1])
	quick.Spill[0].Requests = 300
	got = verdicts(quick)
	for _, name := range []string{"WAN: chats crossing regions, local workers healthy", "WAN: cross-region share, 1 of 2 local engines killed",
		"WAN: fleet-acknowledged disable p99, 3 regions, through the leader's region"} {
		if got[name] != "none" {
			t.Errorf("%q in a quick run: %q; want no verdict", name, got[name])
		}
	}
	if g := wanGoals(notMeasured("not root")); g != nil {
		t.Errorf("goals of a section not measured: %v", g)
	}
}

func TestJudgeLoad(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	wins := []window{{at(100), at(200)}, {at(500), at(600)}}
	sends := []loadSend{
		{at(50), 200},  // before the first disable returned: may reach the worker
		{at(99), 200},  // still before
		{at(100), 503}, // at the return: counted, refused
		{at(150), 200}, // while disabled, answered by the worker: a violation
		{at(200), 200}, // when the enable was sent: not counted
		{at(550), 0},   // while disabled, no answer: counted, not reached
		{at(599), 503},
		{at(700), 200},
	}
	after, reached := judgeLoad(sends, wins)
	if after != 4 || reached != 1 {
		t.Errorf("judgeLoad = %d sent while disabled, %d reached; want 4, 1", after, reached)
	}
}

func TestSlowestOf(t *testing.T) {
	qs := []quietWrite{{3 * time.Millisecond, 1}, {1500 * time.Microsecond, 2}, {9 * time.Millisecond, 3}, {2 * time.Millisecond, 4}}
	got := slowestOf(qs, 3)
	if len(got) != 3 || got[0].commitLEMs != 3 || got[1].commitLEMs != 1 || got[2].commitLEMs != 4 || qs[0].commitLEMs != 1 {
		t.Errorf("slowestOf = %v; want the 9, 3 and 2 ms writes with their commits, the input untouched", got)
	}
	if got := slowestOf(qs[:1], 3); len(got) != 1 {
		t.Errorf("slowestOf one = %v", got)
	}
}

func TestCommitLE(t *testing.T) {
	page := func(counts ...int) string {
		var b strings.Builder
		b.WriteString("# TYPE meshgw_raft_apply_duration_seconds histogram\n")
		for i, le := range []string{"0.064", "0.128", "0.256", "+Inf"} {
			fmt.Fprintf(&b, "meshgw_raft_apply_duration_seconds_bucket{command=\"worker_put\",le=%q} %d\n", le, counts[i])
			fmt.Fprintf(&b, "meshgw_raft_apply_duration_seconds_bucket{command=\"other\",le=%q} 1\n", le)
		}
		return b.String()
	}
	before := parseApplyBuckets(page(2, 5, 6, 6))
	if before[0.128] != 6 || before[0.256] != 7 || len(before) != 3 {
		t.Fatalf("parsed %v; want the finite bounds summed over commands", before)
	}
	if got := commitLE(before, parseApplyBuckets(page(2, 6, 7, 7))); got != 128 {
		t.Errorf("a commit between 64 and 128 ms: %v; want 128", got)
	}
	if got := commitLE(before, parseApplyBuckets(page(2, 5, 7, 7))); got != 256 {
		t.Errorf("a commit between 128 and 256 ms: %v; want 256", got)
	}
	if got := commitLE(before, before); got != -1 {
		t.Errorf("no commit: %v; want -1", got)
	}
}

func TestOver(t *testing.T) {
	ds := []time.Duration{299 * time.Millisecond, 300 * time.Millisecond, 300*time.Millisecond + time.Microsecond, time.Second}
	if n := over(ds, 300); n != 2 {
		t.Errorf("over(%v, 300) = %d; want 2 (300 ms itself is within)", ds, n)
	}
}
