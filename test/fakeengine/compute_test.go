package fakeengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// block returns one 64-byte cache block of the letter c.
func block(c byte) string { return strings.Repeat(string(c), DefaultBlockChars) }

func TestPrefixCacheMatchesChainedBlocks(t *testing.T) {
	a, b, c, d := block('a'), block('b'), block('c'), block('d')
	tests := []struct {
		name     string
		capacity int
		admitted []string // admitted in order before the lookup
		text     string
		want     int // cached bytes of text
	}{
		{"empty cache", 8, nil, a + b, 0},
		{"same text", 8, []string{a + b + c}, a + b + c, 3 * DefaultBlockChars},
		{"longer text hits its cached head", 8, []string{a + b}, a + b + c + d, 2 * DefaultBlockChars},
		{"shorter text", 8, []string{a + b + c}, a + b, 2 * DefaultBlockChars},
		{"a partial block is never cached", 8, []string{a + b + "xyz"}, a + b + "xyz", 2 * DefaultBlockChars},
		{"a text shorter than a block", 8, []string{"hello"}, "hello", 0},
		{"a block matches only after the same head", 8, []string{b + c, a + d}, a + c, DefaultBlockChars},
		{"a miss ends the match", 8, []string{a + b + c}, a + d + c, DefaultBlockChars},
		{"the least recently used text is evicted", 4, []string{a + b, c + d, a + b, d + c}, c + d, 0},
		{"a recently used text stays", 4, []string{a + b, c + d, a + b, d + c}, a + b, 2 * DefaultBlockChars},
		{"a text's tail is evicted before its head", 3, []string{a + b + c, d}, a + b + c, 2 * DefaultBlockChars},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newPrefixCache(tt.capacity, DefaultBlockChars)
			for _, s := range tt.admitted {
				c.admit(s)
			}
			if got := c.admit(tt.text); got != tt.want {
				t.Errorf("admit = %d cached bytes, want %d", got, tt.want)
			}
			if blocks, _ := c.usage(); blocks > tt.capacity {
				t.Errorf("holds %d blocks, capacity %d", blocks, tt.capacity)
			}
		})
	}
}

func TestPrefixCacheCountsEvictions(t *testing.T) {
	c := newPrefixCache(2, DefaultBlockChars)
	c.admit(block('a') + block('b') + block('c'))
	if blocks, ev := c.usage(); blocks != 2 || ev != 1 {
		t.Errorf("usage = %d blocks, %d evictions; want 2, 1", blocks, ev)
	}
}

func TestSlotsQueueInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSlots(1)
		if waited, err := s.acquire(context.Background(), nil); waited || err != nil {
			t.Fatalf("first acquire: waited %v, %v", waited, err)
		}
		var mu sync.Mutex
		var order []int
		for i := range 3 {
			go func() {
				waited, err := s.acquire(context.Background(), nil)
				if !waited || err != nil {
					t.Errorf("waiter %d: waited %v, %v", i, waited, err)
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				s.release()
			}()
			synctest.Wait() // waiter i is queued before i+1 arrives
		}
		if busy, waiting := s.load(); busy != 1 || waiting != 3 {
			t.Errorf("load = %d busy, %d waiting; want 1, 3", busy, waiting)
		}
		s.release()
		synctest.Wait()
		if diff := cmp.Diff([]int{0, 1, 2}, order); diff != "" {
			t.Errorf("order (-want +got):\n%s", diff)
		}
		if busy, waiting := s.load(); busy != 0 || waiting != 0 {
			t.Errorf("load after = %d busy, %d waiting; want 0, 0", busy, waiting)
		}
	})
}

func TestSlotsWaiterThatGivesUpLeavesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSlots(1)
		_, _ = s.acquire(context.Background(), nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		done := make(chan struct{})
		closed := make(chan error, 1)
		go func() { _, err := s.acquire(context.Background(), done); closed <- err }()
		if _, err := s.acquire(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("acquire after its deadline: %v", err)
		}
		close(done)
		if err := <-closed; !errors.Is(err, ErrClosed) {
			t.Errorf("acquire on a closed engine: %v", err)
		}
		if _, waiting := s.load(); waiting != 0 {
			t.Errorf("%d still waiting", waiting)
		}
		s.release()
		if waited, err := s.acquire(context.Background(), nil); waited || err != nil {
			t.Errorf("the freed slot: waited %v, %v", waited, err)
		}
	})
}

func TestNilSlotsAdmitEveryone(t *testing.T) {
	s := newSlots(0)
	for range 3 {
		if waited, err := s.acquire(context.Background(), nil); waited || err != nil {
			t.Fatalf("waited %v, %v", waited, err)
		}
	}
	s.release()
}

// sent is one payload a recSink received, and when.
type sent struct {
	at time.Duration // since the sink was made
	p  string
}

// recSink records what serve sends, with the fake clock's time.
type recSink struct {
	t0     time.Time
	status int
	sent   []sent
}

func newRecSink() *recSink { return &recSink{t0: time.Now()} }

func (s *recSink) start(status int, _ string, _ int) error { s.status = status; return nil }
func (s *recSink) send(p []byte) error {
	s.sent = append(s.sent, sent{time.Since(s.t0), string(p)})
	return nil
}
func (s *recSink) cut() error { return errCut }

// slowSink is a recSink whose every send takes perSend.
type slowSink struct {
	*recSink
	perSend time.Duration
}

func (s slowSink) send(p []byte) error {
	err := s.recSink.send(p)
	time.Sleep(s.perSend)
	return err
}

// usageOf decodes the usage of an OpenAI answer or chunk, and SGLang's meta_info.
type usageOf struct {
	Choices []json.RawMessage `json:"choices"`
	Usage   *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	MetaInfo *struct {
		PromptTokens int `json:"prompt_tokens"`
		CachedTokens int `json:"cached_tokens"`
	} `json:"meta_info"`
}

func decodeUsage(t *testing.T, p string) usageOf {
	t.Helper()
	var u usageOf
	if err := json.Unmarshal([]byte(p), &u); err != nil {
		t.Fatalf("%v: %s", err, p)
	}
	return u
}

// chatOf is a chat request with a system prompt and one user message: its routing text is
// system + " " + user.
func chatOf(system, user string, extra string) string {
	return `{"model":"fake-model",` + extra + `"messages":[{"role":"system","content":"` + system +
		`"},{"role":"user","content":[{"type":"text","text":"` + user + `"},{"type":"image_url","image_url":{"url":"x"}}]}]}`
}

func TestComputeTimesAndCachedTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Compute: Compute{CacheBlocks: 100, Slots: 1,
			PrefillPerToken: time.Millisecond, DecodePerToken: 10 * time.Millisecond}})
		defer e.Close()
		_ = e.SetFaults(Faults{HealthStatus: 200, ErrorRate: 1, StreamChunks: 5, WeightUpdateStatus: 200})
		// 255 + 1 + 256 bytes: 512 bytes, 128 tokens, 8 full blocks.
		body := chatOf(strings.Repeat("s", 255), strings.Repeat("u", 256), `"stream":true,"stream_options":{"include_usage":true},`)
		first, second := newRecSink(), newRecSink()
		errc := make(chan error, 2)
		go func() {
			errc <- e.serve(context.Background(), modelRequest{route: RouteChat, body: []byte(body)}, first)
		}()
		synctest.Wait()
		go func() {
			errc <- e.serve(context.Background(), modelRequest{route: RouteChat, body: []byte(body)}, second)
		}()
		synctest.Wait()
		if s := e.Stats(); s.Running != 1 || s.Waiting != 1 {
			t.Errorf("stats while the first computes: running %d, waiting %d; want 1, 1", s.Running, s.Waiting)
		}
		for range 2 {
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		}

		// The first: 128 tokens of prefill, then 4 decode steps; 5 chunks, the usage, [DONE].
		wantFirst := []time.Duration{128, 138, 148, 158, 168, 168, 168}
		// The second waits for the slot (168 ms), then prefills the one token never cached.
		wantSecond := []time.Duration{169, 179, 189, 199, 209, 209, 209}
		for _, c := range []struct {
			name   string
			sink   *recSink
			want   []time.Duration
			cached int
		}{{"first", first, wantFirst, 0}, {"second", second, wantSecond, 127}} {
			var got []time.Duration
			for _, s := range c.sink.sent {
				got = append(got, s.at/time.Millisecond)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("%s: send times in ms (-want +got):\n%s", c.name, diff)
			}
			if len(c.sink.sent) != 7 {
				continue
			}
			u := decodeUsage(t, c.sink.sent[5].p)
			if len(u.Choices) != 0 || u.Usage == nil || u.Usage.PromptTokens != 128 || u.Usage.CompletionTokens != 5 ||
				u.Usage.PromptTokensDetails.CachedTokens != c.cached {
				t.Errorf("%s: usage chunk %s, want 128 prompt tokens, 5 completion, %d cached", c.name, c.sink.sent[5].p, c.cached)
			}
			if u := decodeUsage(t, c.sink.sent[4].p); u.Usage != nil {
				t.Errorf("%s: a content chunk carries usage: %s", c.name, c.sink.sent[4].p)
			}
		}
		// The first held its slot 168 ms, the second from 168 to 209 ms.
		want := &ComputeStats{PromptTokens: 256, CachedTokens: 127, Queued: 1, QueueWaitMS: 168, SlotMS: 168 + 41,
			CacheBlocks: 8}
		if diff := cmp.Diff(want, e.Stats().ComputeStats); diff != "" {
			t.Errorf("stats (-want +got):\n%s", diff)
		}
	})
}

// A stream's tokens keep the decode's pace when sending them takes time, as an engine's
// decode runs beside its sending: a slow send delays the events after it, not the schedule.
func TestDecodePaceDoesNotDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Compute: Compute{Slots: 1, PrefillPerToken: time.Millisecond, DecodePerToken: 10 * time.Millisecond}})
		defer e.Close()
		_ = e.SetFaults(Faults{HealthStatus: 200, ErrorRate: 1, StreamChunks: 5, WeightUpdateStatus: 200})
		body := chatOf(strings.Repeat("s", 255), strings.Repeat("u", 256), `"stream":true,"stream_options":{"include_usage":true},`)
		out := slowSink{recSink: newRecSink(), perSend: 4 * time.Millisecond}
		if err := e.serve(context.Background(), modelRequest{route: RouteChat, body: []byte(body)}, out); err != nil {
			t.Fatal(err)
		}
		var got []time.Duration
		for _, s := range out.sent {
			got = append(got, s.at/time.Millisecond)
		}
		// 128 ms of prefill, then a token every 10 ms; the usage chunk and [DONE] follow the
		// last token as soon as its send (4 ms) ends.
		want := []time.Duration{128, 138, 148, 158, 168, 172, 176}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("send times in ms (-want +got):\n%s", diff)
		}
		if s := e.Stats(); s.SlotMS != 180 {
			t.Errorf("slot held %v ms, want 180 (to the end of the last send)", s.SlotMS)
		}
	})
}

func TestUsageInEveryAnswerShape(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Compute: Compute{CacheBlocks: 100}})
		defer e.Close()
		text := strings.Repeat("p", 3*DefaultBlockChars+10) // 202 bytes: 51 tokens, 3 full blocks
		tests := []struct {
			name, route, body string
			stream            bool
		}{
			{"chat", RouteChat, `{"messages":[{"role":"user","content":"` + text + `"}]}`, false},
			{"chat stream without include_usage", RouteChat, `{"stream":true,"messages":[{"role":"user","content":"` + text + `"}]}`, true},
			{"completion", RouteCompletions, `{"prompt":"` + text + `"}`, false},
			{"completion stream", RouteCompletions, `{"prompt":"` + text + `","stream":true,"stream_options":{"include_usage":true}}`, true},
			{"generate", RouteGenerate, `{"text":"` + text + `"}`, false},
			{"generate stream", RouteGenerate, `{"text":"` + text + `","stream":true}`, true},
			{"embeddings", RouteEmbeddings, `{"input":"` + text + `"}`, false},
		}
		for i, tt := range tests {
			// Each route's text is cached by the first request of all: every one hits 48 tokens
			// but the first.
			wantCached := 48
			if i == 0 {
				wantCached = 0
			}
			sink := newRecSink()
			if err := e.serve(context.Background(), modelRequest{route: tt.route, body: []byte(tt.body)}, sink); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			lastAt := len(sink.sent) - 1
			if tt.stream {
				lastAt-- // the event before [DONE]
			}
			last := decodeUsage(t, sink.sent[lastAt].p)
			switch {
			case tt.name == "chat stream without include_usage":
				if last.Usage != nil || len(sink.sent) != 21 {
					t.Errorf("%s: %d events, last %s; want 20 chunks and [DONE], no usage", tt.name, len(sink.sent), sink.sent[19].p)
				}
			case tt.route == RouteGenerate:
				if m := last.MetaInfo; m == nil || m.PromptTokens != 51 || m.CachedTokens != wantCached {
					t.Errorf("%s: meta_info %+v, want 51 prompt tokens, %d cached", tt.name, m, wantCached)
				}
			default:
				if u := last.Usage; u == nil || u.PromptTokens != 51 || u.PromptTokensDetails.CachedTokens != wantCached {
					t.Errorf("%s: usage %+v, want 51 prompt tokens, %d cached", tt.name, u, wantCached)
				}
				if !strings.Contains(sink.sent[lastAt].p, `"prompt_tokens_details":{"cached_tokens":`) {
					t.Errorf("%s: usage without prompt_tokens_details.cached_tokens: %s", tt.name, sink.sent[lastAt].p)
				}
			}
		}
	})
}

func TestClientLeavingFreesItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Compute: Compute{Slots: 1, PrefillPerToken: time.Second}})
		defer e.Close()
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- e.serve(ctx, modelRequest{route: RouteChat, body: []byte(chatBody)}, newRecSink()) }()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("serve: %v, want context.Canceled", err)
		}
		start := time.Now()
		if err := e.serve(context.Background(), modelRequest{route: RouteChat, body: []byte(chatBody)}, newRecSink()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Second {
			t.Errorf("the next request took %v, want 1s of prefill and no wait", took)
		}
		if s := e.Stats(); s.Running != 0 || s.Queued != 0 {
			t.Errorf("stats: %+v", *s.ComputeStats)
		}
	})
}

// Prefill lanes make prompts admitted together prefill one after another, as a GPU's one
// forward pass at a time; without them each admitted request prefills at once. A lane is held
// for the prefill only: each answer's decode (2 more tokens, 10 ms each) runs beside the next
// prompt's prefill, for every slot at once.
func TestPrefillLanesTakeTurns(t *testing.T) {
	for _, tt := range []struct {
		lanes int
		want  []time.Duration // when each of three admitted prompts sends its first token, in ms
		stats ComputeStats
	}{
		{0, []time.Duration{128, 128, 128}, ComputeStats{PromptTokens: 384, SlotMS: 3 * 148}},
		{1, []time.Duration{128, 256, 384}, ComputeStats{PromptTokens: 384, PrefillQueued: 2,
			PrefillWaitMS: 128 + 256, SlotMS: 148 + 276 + 404}},
		{2, []time.Duration{128, 128, 256}, ComputeStats{PromptTokens: 384, PrefillQueued: 1,
			PrefillWaitMS: 128, SlotMS: 148 + 148 + 276}},
	} {
		t.Run(fmt.Sprintf("lanes=%d", tt.lanes), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := New(Config{Compute: Compute{Slots: 4, PrefillLanes: tt.lanes, PrefillPerToken: time.Millisecond,
					DecodePerToken: 10 * time.Millisecond}})
				defer e.Close()
				_ = e.SetFaults(Faults{HealthStatus: 200, ErrorRate: 1, StreamChunks: 3, WeightUpdateStatus: 200})
				sinks := make([]*recSink, len(tt.want))
				errc := make(chan error, len(sinks))
				for i := range sinks {
					// 512 bytes each, 128 tokens, and no block in common.
					body := chatOf(strings.Repeat(string(rune('a'+i)), 255), strings.Repeat("u", 256), `"stream":true,`)
					sinks[i] = newRecSink()
					go func() {
						errc <- e.serve(context.Background(), modelRequest{route: RouteChat, body: []byte(body)}, sinks[i])
					}()
					synctest.Wait() // prompt i is admitted before i+1 arrives
				}
				for range sinks {
					if err := <-errc; err != nil {
						t.Fatal(err)
					}
				}
				for i, s := range sinks {
					if len(s.sent) == 0 || s.sent[0].at != tt.want[i]*time.Millisecond {
						t.Errorf("prompt %d: sends %v, want its first at %v ms", i, s.sent, tt.want[i])
					} else if last := s.sent[len(s.sent)-1].at; last != (tt.want[i]+20)*time.Millisecond {
						t.Errorf("prompt %d: last send at %v, want %v ms: its decode, 20 ms after its first token", i, last, tt.want[i]+20)
					}
				}
				if diff := cmp.Diff(&tt.stats, e.Stats().ComputeStats); diff != "" {
					t.Errorf("stats (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// A request that leaves while it waits for a prefill lane frees its slot and its place.
func TestClientLeavingWhileWaitingForALane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Compute: Compute{Slots: 2, PrefillLanes: 1, PrefillPerToken: time.Millisecond}})
		defer e.Close()
		errc := make(chan error, 1)
		go func() {
			errc <- e.serve(context.Background(), modelRequest{route: RouteChat, body: []byte(chatBody)}, newRecSink())
		}()
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		go func() { errc <- e.serve(ctx, modelRequest{route: RouteChat, body: []byte(chatBody)}, newRecSink()) }()
		synctest.Wait()
		cancel()
		for range 2 {
			if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		}
		if s := e.Stats(); s.Running != 0 || s.PrefillQueued != 1 {
			t.Errorf("stats: %+v", *s.ComputeStats)
		}
		// Both the slot and the lane are free: the next request prefills at once.
		start := time.Now()
		if err := e.serve(context.Background(), modelRequest{route: RouteChat, body: []byte(chatBody)}, newRecSink()); err != nil {
			t.Fatal(err)
		}
		if took, want := time.Since(start), time.Duration(promptTokens("hi"))*time.Millisecond; took != want {
			t.Errorf("the next request took %v, want %v of prefill and no wait", took, want)
		}
	})
}

func TestFaultsStillApplyWithCompute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Compute: Compute{CacheBlocks: 10, Slots: 1, PrefillPerToken: time.Millisecond}})
		defer e.Close()
		_ = e.SetFaults(Faults{HealthStatus: 200, ErrorStatus: 503, ErrorRate: 1, StreamChunks: 20, WeightUpdateStatus: 200})
		sink := newRecSink()
		if err := e.serve(context.Background(), modelRequest{route: RouteChat, body: []byte(chatBody)}, sink); err != nil || sink.status != 503 {
			t.Errorf("error_status: %d, %v", sink.status, err)
		}
		_ = e.SetFaults(Faults{HealthStatus: 200, ErrorRate: 1, StreamChunks: 20, CutStreamAfter: 3, WeightUpdateStatus: 200})
		sink = newRecSink()
		if err := e.serve(context.Background(), modelRequest{route: RouteChat, body: []byte(chatStreamBody)}, sink); !errors.Is(err, errCut) || len(sink.sent) != 3 {
			t.Errorf("cut_stream_after 3: %d sent, %v", len(sink.sent), err)
		}
		if s := e.Stats(); s.Requests != 2 || s.PromptTokens != 1 || s.Running != 0 {
			t.Errorf("stats: %d requests, %+v; want 2 requests, only the cut one computed", s.Requests, *s.ComputeStats)
		}
	})
}

// With CacheAnswers, a finished answer is cached after its prompt, as SGLang and vLLM keep
// generated tokens: the next turn of the chat, which repeats the answer, finds the prompt and
// the answer cached (whole blocks), whether the answer was streamed or not. Without it only
// the previous prompt is.
func TestCacheAnswersCachesTheNextTurnsPrompt(t *testing.T) {
	system, user, next := strings.Repeat("s", 255), strings.Repeat("u", 256), strings.Repeat("n", 100)
	msg := func(role, content string) string { return `{"role":"` + role + `","content":"` + content + `"}` }
	for _, c := range []struct {
		name    string
		answers bool
		stream  string
	}{{"answers cached, streamed", true, `"stream":true,`}, {"answers cached, plain", true, ""}, {"prompts only", false, ""}} {
		t.Run(c.name, func(t *testing.T) {
			e := New(Config{NodeName: "n1", Compute: Compute{CacheBlocks: 100, CacheAnswers: c.answers}})
			defer e.Close()
			first := `{"model":"fake-model",` + c.stream + `"messages":[` + msg("system", system) + `,` + msg("user", user) + `]}`
			if err := e.serve(context.Background(), modelRequest{route: RouteChat, body: []byte(first)}, newRecSink()); err != nil {
				t.Fatal(err)
			}
			answer := AnswerText("n1", user)
			second := `{"model":"fake-model","messages":[` + msg("system", system) + `,` + msg("user", user) + `,` +
				msg("assistant", answer) + `,` + msg("user", next) + `]}`
			sink := newRecSink()
			if err := e.serve(context.Background(), modelRequest{route: RouteChat, body: []byte(second)}, sink); err != nil {
				t.Fatal(err)
			}
			// The first prompt is 512 bytes, 8 blocks; with its answer, 512 + 1 + len(answer).
			want := 512 / 4
			if c.answers {
				want = (512 + 1 + len(answer)) / DefaultBlockChars * DefaultBlockChars / 4
			}
			if u := decodeUsage(t, sink.sent[0].p); u.Usage == nil || u.Usage.PromptTokensDetails.CachedTokens != want {
				t.Errorf("second turn's usage %s, want %d cached tokens", sink.sent[0].p, want)
			}
		})
	}
}
