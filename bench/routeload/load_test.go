package routeload

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/test/fakeengine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestScriptIsReproducibleAndWithinBounds(t *testing.T) {
	w := Workload{SystemPrompts: 3, Sessions: 20, Turns: 4, Seed: 7}
	s := w.Script()
	if diff := cmp.Diff(s, w.Script()); diff != "" {
		t.Fatalf("the same seed wrote another script (-first +second):\n%s", diff)
	}
	if other := (Workload{SystemPrompts: 3, Sessions: 20, Turns: 4, Seed: 8}).Script(); cmp.Equal(s, other) {
		t.Error("another seed wrote the same script")
	}
	if len(s.Systems) != 3 || len(s.Sessions) != 20 {
		t.Fatalf("%d system prompts, %d sessions", len(s.Systems), len(s.Sessions))
	}
	for i, sys := range s.Systems {
		if len(sys) < 2048 || len(sys) > 4096+32 {
			t.Errorf("system prompt %d is %d bytes, want 2048-4096 and its label", i, len(sys))
		}
		for j := range i {
			if sys[:64] == s.Systems[j][:64] {
				t.Errorf("system prompts %d and %d share their first block", j, i)
			}
		}
	}
	for i, ss := range s.Sessions {
		if ss.System < 0 || ss.System >= 3 || len(ss.Users) != 4 {
			t.Fatalf("session %d: %+v", i, ss)
		}
		for _, u := range ss.Users {
			if len(u) < 200 || len(u) > 600 {
				t.Errorf("session %d: a user message of %d bytes, want 200-600", i, len(u))
			}
		}
	}
}

// startEngines starts n in-process fake engines with a prefix cache of blocks blocks.
func startEngines(t *testing.T, n, blocks int) []string {
	t.Helper()
	var urls []string
	for range n {
		e := fakeengine.New(fakeengine.Config{Logger: slog.New(slog.DiscardHandler),
			Compute: fakeengine.Compute{CacheBlocks: blocks}})
		u, err := e.Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		urls = append(urls, u)
	}
	return urls
}

func TestRunMeasuresCacheHits(t *testing.T) {
	w := Workload{SystemPrompts: 2, Sessions: 12, Turns: 3, Seed: 1}
	tests := []struct {
		name          string
		engines       int
		blocks        int
		wantFollowUps float64 // share served from cache
	}{
		// One engine with room for everything holds every earlier turn.
		{"one engine", 1, 100_000, 1},
		// Without a cache nothing is cached.
		{"no cache", 2, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Run(context.Background(), w.Script(), Options{Gateways: startEngines(t, tt.engines, tt.blocks), InFlight: 4})
			if r.Requests != 36 || r.Failed != 0 || r.Unsent != 0 || r.FirstError != "" {
				t.Fatalf("result %+v, want 36 turns answered", r)
			}
			if r.FollowUps != 24 || r.FollowUpShare != tt.wantFollowUps {
				t.Errorf("follow-ups %d, share %v; want 24, %v", r.FollowUps, r.FollowUpShare, tt.wantFollowUps)
			}
			if r.PromptTokens < 36*512 || (tt.blocks == 0) != (r.CachedTokens == 0) {
				t.Errorf("%d prompt tokens, %d cached", r.PromptTokens, r.CachedTokens)
			}
			if r.TTFTP50Ms <= 0 || r.TTFTP99Ms < r.TTFTP50Ms || r.TTFTMeanMs <= 0 || r.TTFTMeanMs > r.TTFTP99Ms || r.RequestsPerSec <= 0 {
				t.Errorf("TTFT p50 %v, p99 %v, mean %v, %v req/s", r.TTFTP50Ms, r.TTFTP99Ms, r.TTFTMeanMs, r.RequestsPerSec)
			}
		})
	}
}

// TestOpenLoopStartsSessionsAtTheRate: with a session rate, every session starts after an
// exponential wait of mean 1/rate (InFlight does not limit them), and the sessions not started
// when the load stops count as unsent.
func TestOpenLoopStartsSessionsAtTheRate(t *testing.T) {
	w := Workload{SystemPrompts: 2, Sessions: 40, Turns: 2, Seed: 3}
	gws := startEngines(t, 2, 100_000)
	var mu sync.Mutex
	var waits []time.Duration
	record := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
		return nil
	}
	r := Run(context.Background(), w.Script(), Options{Gateways: gws, InFlight: 1, SessionRate: 20, Sleep: record})
	if r.Requests != 80 || r.Failed != 0 || r.Unsent != 0 {
		t.Fatalf("result %+v, want 80 turns answered", r)
	}
	if len(waits) != 39 {
		t.Fatalf("%d waits between 40 session starts, want 39", len(waits))
	}
	var sum time.Duration
	for _, d := range waits {
		sum += d
	}
	if mean := sum / time.Duration(len(waits)); mean < 25*time.Millisecond || mean > 100*time.Millisecond {
		t.Errorf("mean wait between sessions %v, want about 50 ms (20 a second)", mean)
	}

	stopAt := 10
	calls := 0
	stop := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls == stopAt {
			return context.DeadlineExceeded
		}
		return nil
	}
	r = Run(context.Background(), w.Script(), Options{Gateways: gws, SessionRate: 20, Sleep: stop})
	if r.Requests != 2*stopAt || r.Unsent != 2*(40-stopAt) || r.Failed != 0 {
		t.Errorf("stopped at the %dth start: result %+v, want %d answered and %d unsent", stopAt, r, 2*stopAt, 2*(40-stopAt))
	}
}

func TestRunCountsFailures(t *testing.T) {
	w := Workload{SystemPrompts: 1, Sessions: 3, Turns: 2}
	r := Run(context.Background(), w.Script(), Options{Gateways: []string{"http://127.0.0.1:1"}, InFlight: 2, RequestTimeout: 5 * time.Second})
	if r.Requests != 0 || r.Failed != 3 || r.Unsent != 3 || r.FirstError == "" {
		t.Errorf("result %+v, want 3 failed first turns and 3 unsent", r)
	}
}

func TestReadAnswer(t *testing.T) {
	usage := `data: {"choices":[],"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":8}}}` + "\n\n"
	tests := []struct {
		name, stream string
		want         answer
		wantErr      string
	}{
		{"answer and usage", `data: {"choices":[{"delta":{"content":"he"}}]}` + "\n\n" + `data: {"choices":[{"delta":{"content":"llo"}}]}` + "\n\n" + usage + "data: [DONE]\n\n",
			answer{text: "hello", promptTokens: 10, cachedTokens: 8}, ""},
		{"usage without details", `data: {"choices":[],"usage":{"prompt_tokens":3}}` + "\n\ndata: [DONE]\n\n", answer{promptTokens: 3}, ""},
		{"no usage", `data: {"choices":[{"delta":{"content":"x"}}]}` + "\n\ndata: [DONE]\n\n", answer{}, "without a usage chunk"},
		{"no [DONE]", usage, answer{}, "without [DONE]"},
		{"not JSON", "data: {\n\n", answer{}, "not a chat chunk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			got, err := readAnswer(strings.NewReader(tt.stream), now, func() time.Time { return now })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
