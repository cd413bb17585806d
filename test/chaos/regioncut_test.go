package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshgw/meshgw/test/chaos/check"
	"github.com/meshgw/meshgw/test/chaos/history"
)

// A cut's measurement counts the requests sent through the cut region's gateways during the
// cut: served, by its own workers, lost at home, to an engine fault or spilled away, and left
// out while a process fault held the gateway; and the no-quorum writes' times.
func TestMeasureCuts(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	h := history.History{
		Down:    []history.Down{{Node: "n1", From: 15 * s, To: 16 * s, Reason: "kill"}},
		Engines: []history.EngineFault{{Worker: "w-eu", Kind: "engine-flap", From: 18*s + 500*ms, To: 19 * s}},
		Cuts:    []history.RegionCut{{Region: "eu", Gateways: []string{"n1"}, Workers: []string{"w-eu"}, From: 10 * s, To: 20 * s}},
		Requests: []history.Request{
			{Gateway: "n1", Worker: "w-eu", Status: 200, Invoke: 11 * s, Complete: 11*s + ms, Class: history.Served},
			{Gateway: "n1", Worker: "w-eu", Status: 200, Invoke: 12 * s, Complete: 12*s + ms, Class: history.Served},
			{Gateway: "n1", Worker: "w-us", Status: 502, Invoke: 13 * s, Complete: 13*s + ms, Class: history.GatewayLost}, // spilled away
			{Gateway: "n1", Worker: "w-eu", Status: 504, Invoke: 14 * s, Complete: 17 * s, Class: history.GatewayLost},    // down: left out
			{Gateway: "n1", Status: 503, Invoke: 17 * s, Complete: 17*s + ms, Class: history.NoWorker},
			{Gateway: "n1", Worker: "w-eu", Status: 502, Invoke: 18 * s, Complete: 18*s + ms, Class: history.GatewayLost},            // lost at home
			{Gateway: "n1", Worker: "w-eu", Status: 503, Invoke: 18*s + 600*ms, Complete: 18*s + 700*ms, Class: history.GatewayLost}, // a flap
			{Gateway: "n2", Worker: "w-us", Status: 200, Invoke: 12 * s, Complete: 12*s + ms, Class: history.Served},                 // another region
			{Gateway: "n1", Worker: "w-eu", Status: 200, Invoke: 9 * s, Complete: 11 * s, Class: history.Served},                     // sent before
			{Gateway: "n1", Worker: "w-eu", Status: 200, Invoke: 19 * s, Complete: 21 * s, Class: history.Served},                    // sent within
		},
	}
	w := &cutWatch{cuts: []*RegionCut{{Region: "eu", Gateways: []string{"n1"}, Writes: 3, NoQuorum: 3,
		noQuorum: []time.Duration{40 * ms, 10 * ms, 900 * ms}}}}
	got := w.measureCuts(h, map[string]string{"w-eu": "eu", "w-us": "us"})
	want := []RegionCut{{Region: "eu", Gateways: []string{"n1"}, Writes: 3, NoQuorum: 3,
		Requests:    check.Requests{OK: 3, NoWorker: 1, GatewayLost: 3, GatewayDown: 1},
		ServedShare: 0.5, ServedLocal: 3, LostAway: 1, LostFaulted: 1, HomeShare: 0.75, NoQuorumP50Ms: 40, NoQuorumMaxMs: 900}}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(RegionCut{})); diff != "" {
		t.Errorf("measureCuts (-want +got):\n%s", diff)
	}
	var b strings.Builder
	printCuts(&b, got)
	for _, part := range []string{"region cut eu (n1)", "served 0.5000 of 6, its own workers 0.7500 (3 served; 1 spilled away and lost, 1 lost to engine faults)",
		"writes answered 3, 3 no quorum", "p50 40ms, max 900ms"} {
		if !strings.Contains(b.String(), part) {
			t.Errorf("no %q in %q", part, b.String())
		}
	}
}
