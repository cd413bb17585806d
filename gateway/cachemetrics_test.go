package gateway

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/policy"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// cacheUpstream answers plain requests with the engines' usage reports: OpenAI's shape on the
// OpenAI routes, SGLang's meta_info on /generate.
func cacheUpstream(rw http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	rw.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/generate" {
		_, _ = io.WriteString(rw, `{"text":"hi","meta_info":{"id":"1","finish_reason":{"type":"stop"},"prompt_tokens":40,"completion_tokens":2,"cached_tokens":30}}`)
		return
	}
	_, _ = io.WriteString(rw, `{"id":"1","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":100,"completion_tokens":2,`+
		`"total_tokens":102,"prompt_tokens_details":{"cached_tokens":60}}}`)
}

func TestCacheTokensOfPlainAnswers(t *testing.T) {
	clk := &testClock{now: time.Unix(1_700_000_000, 0)}
	e := newEnv(t, Config{Clock: clk.Now})
	_, w := e.upstream(cacheUpstream)
	for _, p := range []string{"/v1/chat/completions", "/v1/completions", "/generate"} {
		if st, _, body := e.post(p, `{"prompt":"x","text":"x"}`); st != 200 {
			t.Fatalf("%s: %d %s", p, st, body)
		}
	}
	if pr, ca := w.CacheTokens(); pr != 240 || ca != 150 {
		t.Fatalf("CacheTokens = %d, %d; want 240, 150", pr, ca)
	}
	labels := map[string]string{"worker": w.URL}
	if n := counterValue(t, e, "meshgw_worker_prompt_tokens_total", labels); n != 240 {
		t.Errorf("meshgw_worker_prompt_tokens_total = %v, want 240", n)
	}
	if n := counterValue(t, e, "meshgw_worker_cached_tokens_total", labels); n != 150 {
		t.Errorf("meshgw_worker_cached_tokens_total = %v, want 150", n)
	}
	// The series stay for the TTL after the worker is removed, then go.
	if err := e.gw.Pool().Remove(w.ID); err != nil {
		t.Fatal(err)
	}
	if n := counterValue(t, e, "meshgw_worker_prompt_tokens_total", labels); n != 240 {
		t.Fatalf("after the removal: %v, want the last value until the TTL", n)
	}
	clk.Advance(breaker.RemovedSeriesTTL)
	for _, name := range []string{"meshgw_worker_prompt_tokens_total", "meshgw_worker_cached_tokens_total"} {
		if n := counterValue(t, e, name, labels); n != -1 {
			t.Errorf("%s of a worker removed %v ago = %v, want none", name, breaker.RemovedSeriesTTL, n)
		}
	}
}

// cache_aware's predictions are exported beside the engines' reports: the routing text the
// gateway's picks sent each worker, and the part its index predicted the worker held.
func TestPredictionSeries(t *testing.T) {
	e := newEnv(t, Config{Policy: "cache_aware", CacheAware: policy.CacheAwareConfig{Rule: policy.RuleSMG}})
	_, w := e.upstream(cacheUpstream)
	body := `{"messages":[{"role":"user","content":"` + strings.Repeat("a shared prompt ", 64) + `"}]}`
	for range 2 {
		if st, _, b := e.post("/v1/chat/completions", body); st != 200 {
			t.Fatalf("%d %s", st, b)
		}
	}
	text, matched := w.Prediction()
	if text == 0 || matched == 0 || matched > text/2 {
		t.Fatalf("Prediction = %d, %d; want two texts, the second matched", text, matched)
	}
	labels := map[string]string{"worker": w.URL}
	if n := counterValue(t, e, "meshgw_worker_routed_text_bytes_total", labels); n != float64(text) {
		t.Errorf("meshgw_worker_routed_text_bytes_total = %v, want %d", n, text)
	}
	if n := counterValue(t, e, "meshgw_worker_predicted_cached_bytes_total", labels); n != float64(matched) {
		t.Errorf("meshgw_worker_predicted_cached_bytes_total = %v, want %d", n, matched)
	}
}

// A worker whose answers report nothing has no series, and a stream without usage counts nothing.
func TestCacheTokensNoReport(t *testing.T) {
	e := newEnv(t, Config{})
	_, w := e.upstream(okHandler("plain"))
	e.post("/v1/chat/completions", `{"messages":[]}`)
	if pr, _ := w.CacheTokens(); pr != 0 {
		t.Fatalf("counted %d prompt tokens from an answer without usage", pr)
	}
	if n := counterValue(t, e, "meshgw_worker_prompt_tokens_total", map[string]string{"worker": w.URL}); n != -1 {
		t.Errorf("series of a worker that reported nothing: %v", n)
	}
}

// Workers sharing a URL (data-parallel ranks) add up under it.
func TestCacheTokensRanksShareTheirURL(t *testing.T) {
	e := newEnv(t, Config{})
	rank := func(r int) func(*worker.Spec) { return func(s *worker.Spec) { s.DPRank = &r } }
	srv, w0 := e.upstream(cacheUpstream, rank(0))
	w1 := e.add(worker.Spec{URL: srv.URL, DPRank: new(1)})
	w0.ObserveCache(10, 5)
	w1.ObserveCache(20, 5)
	if n := counterValue(t, e, "meshgw_worker_cached_tokens_total", map[string]string{"worker": w0.URL}); n != 10 {
		t.Errorf("cached tokens of the URL = %v, want 10", n)
	}
}

// A stream's usage chunk, split across the upstream's writes, is counted once the stream ends,
// while every event still reaches the client on its own: the gateway does not hold the stream
// to read it.
func TestCacheTokensOfStreamEventsOneByOne(t *testing.T) {
	e := newEnv(t, Config{})
	usageChunk := `data: {"id":"c","choices":[],"usage":{"prompt_tokens":33,"completion_tokens":3,"total_tokens":36,` +
		`"prompt_tokens_details":{"cached_tokens":21}}}` + "\n\n"
	half := len(usageChunk) / 2
	writes := []string{"data: {\"i\":1}\n\n", "data: {\"i\":2}\n\n", usageChunk[:half], usageChunk[half:], "data: [DONE]\n\n"}
	next := make(chan struct{})
	_, w := e.upstream(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		rw.WriteHeader(200)
		fl := rw.(http.Flusher)
		fl.Flush()
		for _, s := range writes {
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(rw, s)
			fl.Flush()
		}
	})
	req, _ := http.NewRequest("POST", e.base+"/v1/chat/completions", strings.NewReader(`{"stream":true,"stream_options":{"include_usage":true},"messages":[]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i, want := range []string{writes[0], writes[1]} {
		next <- struct{}{} // the upstream writes event i only now
		if got := readEvent(t, br); got != want {
			t.Fatalf("event %d: got %q, want %q", i+1, got, want)
		}
	}
	next <- struct{}{} // the first half of the usage chunk
	buf := make([]byte, half)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != usageChunk[:half] {
		t.Fatalf("the first half of the usage chunk: %q, %v", buf, err)
	}
	if pr, _ := w.CacheTokens(); pr != 0 {
		t.Fatalf("counted %d prompt tokens before the stream ended", pr)
	}
	next <- struct{}{}
	if got := readEvent(t, br); got != usageChunk[half:] {
		t.Fatalf("the second half: %q", got)
	}
	next <- struct{}{}
	if got := readEvent(t, br); got != "data: [DONE]\n\n" {
		t.Fatalf("last event %q", got)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("stream did not end cleanly: %v", err)
	}
	testkit.For(t, "the stream's usage counted", func() bool {
		pr, ca := w.CacheTokens()
		return pr == 33 && ca == 21
	})
}
