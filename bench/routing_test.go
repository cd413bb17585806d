package bench

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

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
			EngineQueued: 7, EngineWaitMs: 30.4, EnginePrefillMs: 20.6, EngineSlotMs: 61},
		{Policy: "cache_aware", Gateways: 5, Error: "meshgw exited: exit status 2"},
	}}
	var b bytes.Buffer
	res.PrintTable(&b)
	for _, want := range []string{
		"routing: w routing:",
		"every gateway also ran with --x",
		"round_robin 3 0.50 0.25 (2/8) 12 100 41 0.12 7 30 21 61 0 0.00",
		"cache_aware 5 — — — — — — — — — — — —",
		"cache_aware at 5 gateways: meshgw exited: exit status 2",
	} {
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestRoutingEngineArgs: the engines get the standard compute model, and cache answers only
// when asked (-routing-cache-answers).
func TestRoutingEngineArgs(t *testing.T) {
	for _, answers := range []bool{false, true} {
		r := &RoutingOptions{CacheAnswers: answers}
		r.setDefaults()
		got := strings.Join(routingEngineArgs(r, "e1", 9001), " ")
		want := fmt.Sprintf("--port 9001 --node-name e1 --log-level warn --slots 4 --cache-blocks 1024 "+
			"--prefill-us-per-token 200 --decode-us-per-token 2000 --cache-answers=%v --faults {\"stream_chunks\":20}", answers)
		if !strings.HasSuffix(got, want) {
			t.Errorf("args %q, want them to end %q", got, want)
		}
	}
}
