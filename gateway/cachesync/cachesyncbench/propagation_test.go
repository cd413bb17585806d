package cachesyncbench

import (
	"context"
	"strings"
	"testing"
)

func TestPrompt(t *testing.T) {
	for i := 16; i < 400; i++ {
		if p, prev := Prompt(i, 16), Prompt(i-16, 16); !strings.HasPrefix(p, prev[:strings.LastIndex(prev, " turn ")]) || len(p) <= len(prev) {
			t.Fatalf("turn %d does not extend its session's previous prompt", i)
		}
	}
	if n := len(Prompt(0, 16)); n < 6900 || n > 7200 {
		t.Errorf("first prompt %d bytes, want about 7 KB", n)
	}
	if n := len(Prompt(399, 16)); n < 8192 || n > 9216 {
		t.Errorf("400th prompt %d bytes, want 8 to 9 KiB", n)
	}
}

func TestPropagation(t *testing.T) {
	res, err := Propagation(context.Background(), Options{Requests: 20})
	if err != nil {
		t.Fatal(err)
	}
	if res.Gateways != 5 || res.Workers != 4 || res.Owners != 2 || res.Requests != 20 {
		t.Errorf("setup %+v", res)
	}
	if res.P50Ms <= 0 || res.P99Ms < res.P50Ms || res.MaxMs < res.P99Ms || res.WarmUpMs <= 0 {
		t.Errorf("times: p50 %v, p99 %v, max %v, warm-up %v", res.P50Ms, res.P99Ms, res.MaxMs, res.WarmUpMs)
	}
	// 20 turns round 16 sessions through 5 gateways: the owners publish each to 4 subscribers.
	if res.ReportBytes <= 0 || res.PublishBytes <= res.ReportBytes || res.PublishBlocks < 4*res.ReportBlocks || res.Dropped != 0 {
		t.Errorf("counters %+v", res)
	}
	if res.ReportBytesPerReq != float64(res.ReportBytes)/20 || res.PromptMinBytes > res.PromptMaxBytes {
		t.Errorf("per request %v, prompts %d to %d", res.ReportBytesPerReq, res.PromptMinBytes, res.PromptMaxBytes)
	}
}

func TestPropagationEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Propagation(ctx, Options{Requests: 10}); err == nil {
		t.Error("ran with its context ended")
	}
}
