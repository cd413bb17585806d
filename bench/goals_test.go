package bench

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func TestComputeGoals(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	proxy := func(rps, p50 float64, cpu *float64, bad int64) *ProxyTarget {
		return &ProxyTarget{RPS: rps, P50Ms: p50, CPUUsPerReq: cpu, BadResponses: bad, Checked: 100}
	}
	stream := func(sps, ttfb float64, cut int64) *StreamTarget {
		return &StreamTarget{StreamsPerSec: sps, TTFBP50Ms: ttfb, Cut: cut, Completed: 10}
	}
	tests := []struct {
		name   string
		rep    Report
		want   map[string]bool // goal name → met
		absent []string
	}{
		{name: "all met at the boundaries",
			rep: Report{Proxy: map[string]*ProxyTarget{"direct": proxy(1000, 1, nil, 0), "haproxy": proxy(500, 1.2, f(20), 0),
				"meshgw": proxy(400, 1.5, f(30), 0)},
				Stream: &StreamSection{Direct: stream(100, 1, 0), HAProxy: stream(100, 1.5, 0), Meshgw: stream(90, 2, 0)}},
			want: map[string]bool{"meshgw req/s ÷ HAProxy": true, "meshgw CPU per request": true,
				"meshgw added latency p50, 64 connections": true, "meshgw: every response correct": true,
				"meshgw streams/s ÷ HAProxy": true, "meshgw added TTFB p50": true, "meshgw: streams cut": true}},
		{name: "each goal missed",
			rep: Report{Proxy: map[string]*ProxyTarget{"direct": proxy(1000, 1, nil, 0), "haproxy": proxy(500, 1.2, f(20), 0),
				"meshgw": proxy(399, 1.6, f(30.1), 1)},
				Stream: &StreamSection{Direct: stream(100, 1, 0), HAProxy: stream(100, 1.5, 0), Meshgw: stream(89, 2.1, 1)}},
			want: map[string]bool{"meshgw req/s ÷ HAProxy": false, "meshgw CPU per request": false,
				"meshgw added latency p50, 64 connections": false, "meshgw: every response correct": false,
				"meshgw streams/s ÷ HAProxy": false, "meshgw added TTFB p50": false, "meshgw: streams cut": false}},
		{name: "the guard against minproxy, with its rounds",
			rep: Report{Proxy: map[string]*ProxyTarget{"minproxy": {RPS: 1000, Rounds: []ProxyRound{{WrkResult: WrkResult{RPS: 1000}}, {WrkResult: WrkResult{RPS: 800}}}},
				"meshgw": {RPS: 899, Rounds: []ProxyRound{{WrkResult: WrkResult{RPS: 899}}, {WrkResult: WrkResult{RPS: 760}}}}},
				Stream: &StreamSection{Minproxy: stream(100, 1, 0), Meshgw: stream(90, 1, 0)}},
			want: map[string]bool{"meshgw req/s ÷ minproxy": false, "meshgw streams/s ÷ minproxy": true}},
		{name: "nothing compared without HAProxy",
			rep:    Report{Proxy: map[string]*ProxyTarget{"direct": proxy(1000, 1, nil, 0), "meshgw": proxy(400, 1.5, f(25), 0)}},
			want:   map[string]bool{"meshgw CPU per request": true},
			absent: []string{"meshgw req/s ÷ HAProxy", "meshgw streams/s ÷ HAProxy"}},
		{name: "uploads within and over their budget; records skipped",
			rep: Report{Memory: MemoryResult{Status: "measured", Uploads: []UploadRun{
				{EffectiveBudgetMiB: 1024, Uploads: 20, UploadMiB: 100, OK: 12, Overloaded: 8, PeakRSSMiB: 1408},
				{EffectiveBudgetMiB: 64, Uploads: 20, UploadMiB: 100, OK: 20, PeakRSSMiB: 300},
				{EffectiveBudgetMiB: 256, Uploads: 20, UploadMiB: 100, OK: 19, Failed: 1, PeakRSSMiB: 300}}}},
			want: map[string]bool{"RSS under 20 concurrent 100 MiB uploads, budget 1024 MiB": true,
				"RSS under 20 concurrent 100 MiB uploads, budget 64 MiB":  false,
				"RSS under 20 concurrent 100 MiB uploads, budget 256 MiB": false},
			absent: []string{"heap per imported worker", "start with the workers in raft state"}},
		{name: "paced bunching fails",
			rep: Report{Stream: &StreamSection{PacedDelayMs: 100, Paced: map[string]*StreamResult{
				"meshgw":  {Completed: 4, TTFBP50Ms: 1, GapMinMs: f(0.1), GapP50Ms: f(100), GapMaxMs: f(300)},
				"haproxy": {Completed: 4, TTFBP50Ms: 1, GapMinMs: f(99), GapP50Ms: f(100), GapMaxMs: f(101)},
				"direct":  {Completed: 4, TTFBP50Ms: 60, GapMinMs: f(99), GapP50Ms: f(100), GapMaxMs: f(101)}}}},
			want: map[string]bool{"meshgw: paced events one by one": false, "haproxy: paced events one by one": true,
				"direct: paced events one by one": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]Goal{}
			for _, g := range computeGoals(&tt.rep) {
				got[g.Name] = g
			}
			for name, want := range tt.want {
				g, ok := got[name]
				if !ok || g.Met == nil || *g.Met != want {
					t.Errorf("goal %q = %+v, want met=%v", name, g, want)
				}
			}
			for _, name := range tt.absent {
				if g, ok := got[name]; ok {
					t.Errorf("goal %q present without its figures: %+v", name, g)
				}
			}
		})
	}
}

func TestBulletinGoals(t *testing.T) {
	prop := func(peers int, profile string, p99 float64) BulletinPropagation {
		return BulletinPropagation{Peers: peers, Profile: profile, P99Ms: p99, Pairs: 10 * (peers - 1)}
	}
	const name = "bulletin propagation p99 < 1 s (lan, 3 and 100 peers)"
	tests := []struct {
		name string
		mesh MeshResult
		met  *bool // of the propagation goal
		has  bool  // the propagation goal is listed
	}{
		{name: "met below 1 s at 3 and 100", mesh: MeshResult{BulletinPropagation: []BulletinPropagation{prop(3, "lan", 50), prop(100, "lan", 999)}},
			met: met(true), has: true},
		{name: "missed at 100", mesh: MeshResult{BulletinPropagation: []BulletinPropagation{prop(3, "lan", 50), prop(100, "lan", 1000)}},
			met: met(false), has: true},
		{name: "missed at 3", mesh: MeshResult{BulletinPropagation: []BulletinPropagation{prop(3, "lan", 5000), prop(100, "lan", 300)}},
			met: met(false), has: true},
		{name: "quick run: 3 peers only, no verdict", mesh: MeshResult{BulletinPropagation: []BulletinPropagation{prop(3, "lan", 50)}},
			has: true},
		{name: "another profile, no verdict", mesh: MeshResult{BulletinPropagation: []BulletinPropagation{prop(3, "local", 50), prop(100, "local", 50)}},
			has: true},
		{name: "not measured", mesh: MeshResult{BulletinPropagation: notMeasured("boom")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *Goal
			for _, g := range computeGoals(&Report{Mesh: tt.mesh}) {
				if g.Name == name {
					got = &g
				}
			}
			switch {
			case got == nil && tt.has:
				t.Fatal("goal missing")
			case got != nil && !tt.has:
				t.Fatalf("goal present without its figures: %+v", got)
			case got == nil:
				return
			}
			if (got.Met == nil) != (tt.met == nil) || got.Met != nil && *got.Met != *tt.met {
				t.Errorf("goal %+v, want met %v", got, tt.met)
			}
		})
	}
	gs := computeGoals(&Report{Mesh: MeshResult{BulletinBytes: BulletinBytes{Peers: 3, Workers: 10000, ChurnPerS: 100,
		Steady: BytesRate{OwnerBytesPerS: 61000, PeerBytesPerS: 130}, Churn: BytesRate{OwnerBytesPerS: 78000, PeerBytesPerS: 16800}}}})
	if len(gs) != 1 || gs[0].Met != nil || gs[0].Goal != "" || gs[0].Value != "owner 61000 steady, 78000 at 100 changes/s; a peer 130 and 16800" {
		t.Errorf("bulletin bytes goals %+v, want one line for scale", gs)
	}
}

func TestPrintBulletins(t *testing.T) {
	tests := []struct {
		name string
		mesh MeshResult
		want []string
	}{
		{name: "measured", mesh: MeshResult{
			BulletinPropagation: []BulletinPropagation{{Peers: 3, Profile: "lan", P50Ms: 30.5, P99Ms: 50.25, MaxMs: 51, Pairs: 100, BoundMs: 5000}},
			BulletinBytes: BulletinBytes{Peers: 3, Workers: 10000, ChurnPerS: 100, SpreadS: 4, ChurnHeldS: 0.02,
				Steady: BytesRate{OwnerBytesPerS: 61000, PeerBytesPerS: 130}, Churn: BytesRate{OwnerBytesPerS: 78000, PeerBytesPerS: 16800}}},
			want: []string{"mesh: bulletin propagation, 3 peers, lan profile: p50 30.5 ms, p99 50.2 ms, max 51.0 ms, 0 of 100 lost",
				"mesh: bulletin bytes, 10000 workers, 3 peers: steady owner 61000 B/s, peer 130 B/s; 100 changes/s owner 78000 B/s, peer 16800 B/s"}},
		{name: "not measured", mesh: MeshResult{BulletinPropagation: notMeasured("bulletin propagation at 100 peers: boom"),
			BulletinBytes: notMeasured("bulletin bytes: boom")},
			want: []string{"mesh: bulletin propagation: not yet measured (bulletin propagation at 100 peers: boom)",
				"mesh: bulletin bytes: not yet measured (bulletin bytes: boom)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			printBulletins(&b, "mesh", tt.mesh)
			for _, want := range tt.want {
				if !strings.Contains(b.String(), want) {
					t.Errorf("printed %q, want %q in it", b.String(), want)
				}
			}
		})
	}
}

// TestMinproxyGuardShowsEachRound: the guard's line gives the ratio of each interleaved round
// beside the medians' ratio, and leaves them out when the rounds do not pair up. With five
// rounds or more, the verdict is on the median of the rounds' ratios.
func TestMinproxyGuardShowsEachRound(t *testing.T) {
	round := func(rps float64) ProxyRound { return ProxyRound{WrkResult: WrkResult{RPS: rps}} }
	rep := Report{Proxy: map[string]*ProxyTarget{
		"minproxy": {RPS: 1000, Rounds: []ProxyRound{round(1000), round(800), round(1200)}},
		"meshgw":   {RPS: 950, Rounds: []ProxyRound{round(950), round(520), round(1200)}}}}
	guard := func() Goal {
		for _, g := range computeGoals(&rep) {
			if g.Name == "meshgw req/s ÷ minproxy" {
				return g
			}
		}
		t.Fatal("no guard line")
		return Goal{}
	}
	if got, want := guard().Value, "0.95 (950 ÷ 1000; per round 0.95, 0.65, 1.00)"; got != want {
		t.Errorf("guard line %q, want %q", got, want)
	}
	rep.Proxy["meshgw"].Rounds = rep.Proxy["meshgw"].Rounds[:2]
	if got, want := guard().Value, "0.95 (950 ÷ 1000)"; got != want {
		t.Errorf("unpaired rounds: guard line %q, want %q", got, want)
	}
	// Five rounds: the rounds, each measured back to back, say 0.91 in the middle, but the
	// medians' ratio (850 ÷ 1000) is below the guard: not met until both reach it.
	rep.Proxy["minproxy"].Rounds = []ProxyRound{round(1000), round(1200), round(800), round(1100), round(900)}
	rep.Proxy["meshgw"].Rounds = []ProxyRound{round(910), round(1092), round(760), round(1001), round(810)}
	rep.Proxy["meshgw"].RPS, rep.Proxy["minproxy"].RPS = 850, 1000
	g := guard()
	if want := "0.91 (median of 5 rounds: 0.91, 0.91, 0.95, 0.91, 0.90; medians 850 ÷ 1000 = 0.85)"; g.Value != want {
		t.Errorf("paired rounds: guard line %q, want %q", g.Value, want)
	}
	if g.Met == nil || *g.Met {
		t.Errorf("paired rounds at 0.90-0.95, medians at 0.85: verdict %v, want not met", g.Met)
	}
	rep.Proxy["meshgw"].RPS = 920
	if g := guard(); g.Met == nil || !*g.Met {
		t.Errorf("paired rounds at 0.91, medians at 0.92: verdict %v, want met", g.Met)
	}
}

// TestRoundOrderPairsTheGuard: each round runs minproxy and meshgw back to back, meshgw second
// in even rounds and first in odd ones, and rotates the rest.
func TestRoundOrderPairsTheGuard(t *testing.T) {
	ts := []target{{name: "direct"}, {name: "haproxy"}, {name: "minproxy"}, {name: "meshgw"}}
	want := []string{
		"direct haproxy minproxy meshgw",
		"haproxy meshgw minproxy direct",
		"minproxy meshgw direct haproxy",
		"direct haproxy meshgw minproxy",
	}
	for r, w := range want {
		var names []string
		for _, t := range roundOrder(ts, r) {
			names = append(names, t.name)
		}
		if got := strings.Join(names, " "); got != w {
			t.Errorf("round %d: %s, want %s", r, got, w)
		}
	}
}

// TestCPUSplitInTheGuard: the guard line and the table give each proxy's CPU per request and
// the part of it in its own code (user time), the medians over rounds.
func TestCPUSplitInTheGuard(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	round := func(rps, cpu, user float64) ProxyRound {
		return ProxyRound{WrkResult: WrkResult{RPS: rps}, CPUUsPerReq: f(cpu), CPUUserUsPerReq: f(user)}
	}
	rep := Report{Proxy: map[string]*ProxyTarget{
		"minproxy": summarizeProxy([]ProxyRound{round(1000, 40, 14), round(1000, 36, 13), round(1000, 38, 15)}),
		"meshgw":   summarizeProxy([]ProxyRound{round(950, 45, 18), round(950, 41, 17), round(950, 43, 25)})}}
	var line string
	for _, g := range computeGoals(&rep) {
		if g.Name == "meshgw req/s ÷ minproxy" {
			line = g.Value
		}
	}
	if want := "0.95 (950 ÷ 1000; per round 0.95, 0.95, 0.95; CPU per request 43.0 vs 38.0 µs, of it user 18.0 vs 14.0 µs)"; line != want {
		t.Errorf("guard line %q, want %q", line, want)
	}
	var b strings.Builder
	rep.PrintTable(&b)
	if !strings.Contains(b.String(), "of it user") || !regexp.MustCompile(`meshgw +950 .* 43\.0 +18\.0 `).MatchString(b.String()) {
		t.Errorf("the table has no user column with meshgw's 18.0:\n%s", b.String())
	}
	// Without user time (a report from before the split), the line and table say nothing of it.
	rep.Proxy["meshgw"].CPUUserUsPerReq = nil
	for _, g := range computeGoals(&rep) {
		if g.Name == "meshgw req/s ÷ minproxy" && strings.Contains(g.Value, "user") {
			t.Errorf("guard line %q names user time it does not have", g.Value)
		}
	}
}

// The report's header names the rounds of the sections that ran, and only those.
func TestMethodRounds(t *testing.T) {
	for _, tt := range []struct {
		m    Method
		want string
	}{
		{Method{Rounds: 15, WrkDurationS: 2, StreamRounds: 5, StreamDurS: 10}, "15 of 2s plain, 5 of 10s streams"},
		{Method{Rounds: 15, WrkDurationS: 2, StreamDurS: 10}, "15 of 2s plain"},
		{Method{StreamRounds: 1, StreamDurS: 2, WrkDurationS: 3}, "1 of 2s streams"},
		{Method{WrkDurationS: 2, StreamDurS: 10}, "none"},
	} {
		if got := tt.m.rounds(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.m, got, tt.want)
		}
	}
}
