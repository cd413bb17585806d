package bench

import (
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
		{name: "nothing compared without HAProxy",
			rep:    Report{Proxy: map[string]*ProxyTarget{"direct": proxy(1000, 1, nil, 0), "meshgw": proxy(400, 1.5, f(25), 0)}},
			want:   map[string]bool{"meshgw CPU per request": true},
			absent: []string{"meshgw req/s ÷ HAProxy", "meshgw streams/s ÷ HAProxy"}},
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
