package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/meshgw/meshgw/gateway/cachesync/cachesyncbench"
)

func TestCacheSyncResult(t *testing.T) {
	r := cacheSyncResult(cachesyncbench.Result{Gateways: 5, Workers: 4, Owners: 2, Sessions: 16, Requests: 400,
		PromptMinBytes: 6950, PromptMaxBytes: 8900, PromptMeanBytes: 7900, ReportBytes: 36000, ReportBlocks: 1000,
		PublishBytes: 180000, PublishBlocks: 5000, ReportBytesPerReq: 90, PublishBytesPerReq: 450})
	// 8,900 bytes are 140 blocks of 64, sent at most 5 times; 6,000 blocks carried 216,000
	// bytes, 36 per block.
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"bytes per request", r.BytesPerReq, 540}, {"blocks per request", r.BlocksPerReq, 15},
		{"bytes per s at 1,000 requests/s", r.BytesPerSAt1000, 540_000}, {"bound blocks", r.BoundBlocksPerReq, 700},
		{"bound bytes", r.BoundBytesPerReq, 700 * 36}, {"bound bytes per s", r.BoundBytesPerSAt1000, 700 * 36 * 1000}} {
		if math.Abs(c.got-c.want) > 1e-6 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if r.Status != "measured" || !strings.Contains(r.What, "computed, not measured at that rate") {
		t.Errorf("status %q, what %q", r.Status, r.What)
	}
	if z := cacheSyncResult(cachesyncbench.Result{Gateways: 5}); z.BytesPerReq != 0 || z.BoundBytesPerReq != 0 {
		t.Errorf("no requests: %+v", z)
	}
}

func TestCacheSyncGoals(t *testing.T) {
	res := func(gateways int, p99 float64, blocks int64) CacheSyncResult {
		return cacheSyncResult(cachesyncbench.Result{Gateways: gateways, Requests: 100, PromptMaxBytes: 640, PromptMeanBytes: 600,
			P50Ms: 20, P99Ms: p99, MaxMs: p99 + 1, ReportBytes: blocks * 10, ReportBlocks: blocks, ReportBytesPerReq: float64(blocks) / 10})
	}
	const prop, bytesName = "cache index propagation p99, 5 gateways", "cache index bytes per request, 5 gateways, 600-byte prompts"
	tests := []struct {
		name         string
		v            any
		prop, bytes  *bool // nil: no verdict
		hasProp, has bool
	}{
		{name: "met at the bound", v: res(5, 200, 5000), prop: met(true), bytes: met(true), hasProp: true, has: true},
		{name: "missed", v: res(5, 200.1, 5001), prop: met(false), bytes: met(false), hasProp: true, has: true},
		{name: "fewer gateways: no verdict on propagation", v: res(3, 10, 10)},
		{name: "not measured", v: notMeasured("boom")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]Goal{}
			for _, g := range computeGoals(&Report{CacheSync: tt.v}) {
				got[g.Name] = g
			}
			check := func(name string, has bool, want *bool) {
				g, ok := got[name]
				if ok != has {
					t.Errorf("goal %q listed %v, want %v: %+v", name, ok, has, got)
					return
				}
				if ok && ((g.Met == nil) != (want == nil) || g.Met != nil && *g.Met != *want) {
					t.Errorf("goal %+v, want met %v", g, want)
				}
			}
			check(prop, tt.hasProp, tt.prop)
			check(bytesName, tt.has, tt.bytes)
		})
	}
	for _, g := range cacheSyncGoals(res(3, 10, 10)) {
		if strings.HasPrefix(g.Name, "cache index propagation p99, 3 gateways") && (g.Met != nil || g.Goal != "≤ 200 ms with 5") {
			t.Errorf("3 gateways: %+v, want no verdict against ≤ 200 ms with 5", g)
		}
	}
}

func TestPrintCacheSync(t *testing.T) {
	r := cacheSyncResult(cachesyncbench.Result{Gateways: 5, Requests: 400, PromptMaxBytes: 8900, P50Ms: 20.5, P99Ms: 64.25,
		MaxMs: 70, WarmUpMs: 120, ReportBytes: 36000, ReportBlocks: 1000, PublishBytes: 180000, PublishBlocks: 5000,
		ReportBytesPerReq: 90, PublishBytesPerReq: 450})
	var b bytes.Buffer
	(&Report{CacheSync: r}).printSections(&b)
	for _, want := range []string{
		"cachesync: index propagation, 5 gateways, 400 requests: p50 20.5 ms, p99 64.2 ms, max 70.0 ms (warm-up 120 ms)",
		"per request 90 B of reports + 450 B of publications = 540 B (15.0 blocks; bound 700 blocks, 25200 B)",
		"at 1000 requests/s 0.54 MB/s (computed; bound 25.20 MB/s)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printed %q, want %q in it", b.String(), want)
		}
	}
	b.Reset()
	(&Report{CacheSync: notMeasured("skipped (-cachesync=false)")}).printSections(&b)
	if !strings.Contains(b.String(), "cachesync: not yet measured (skipped (-cachesync=false))") {
		t.Errorf("printed %q", b.String())
	}
}
