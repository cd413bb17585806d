package health

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/meshgw/meshgw/worker"
)

func extTarget(url, provider string) Target {
	return Target{ID: "w-ext", URL: url, Mode: worker.ModeExternal, Provider: provider,
		APIKey: "sk-provider-key", GatewayID: "gw-1"}
}

func TestExternalAuthHeaders(t *testing.T) {
	tests := []struct {
		provider string
		want     map[string]string // header → value; "" means absent
	}{
		{"openai", map[string]string{"Authorization": "Bearer sk-provider-key", "x-api-key": "", "api-key": ""}},
		{"openai_compatible", map[string]string{"Authorization": "Bearer sk-provider-key"}},
		{"anthropic", map[string]string{"x-api-key": "sk-provider-key", "anthropic-version": "2023-06-01", "Authorization": ""}},
		{"azure_openai", map[string]string{"api-key": "sk-provider-key", "Authorization": ""}},
		{"gemini", map[string]string{"x-goog-api-key": "sk-provider-key", "Authorization": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.provider, func(t *testing.T) {
			h := &headerLog{code: 200}
			srv := startServer(t, h)
			if err := (&ExternalProber{}).Probe(context.Background(), extTarget(srv.URL, tc.provider)); err != nil {
				t.Fatal(err)
			}
			r := h.last(t)
			for k, v := range tc.want {
				if got := r.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if r.Header.Get("X-Mesh-Gateway") != "" {
				t.Error("X-Mesh-Gateway sent to a third party")
			}
		})
	}
}

func TestExternalNeverDoublesV1(t *testing.T) {
	for _, suffix := range []string{"", "/", "/v1", "/v1/"} {
		t.Run("base"+suffix, func(t *testing.T) {
			h := &headerLog{code: 200}
			srv := startServer(t, h)
			p := &ExternalProber{}
			p.Probe(context.Background(), extTarget(srv.URL+suffix, "openai"))
			if got := h.last(t).URL.Path; got != "/v1/models" {
				t.Errorf("free probe path = %q", got)
			}
			tg := extTarget(srv.URL+suffix, "openai")
			tg.LLMProbeModel = "m"
			p.Probe(context.Background(), tg)
			if got := h.last(t).URL.Path; got != "/v1/chat/completions" {
				t.Errorf("llm probe path = %q", got)
			}
		})
	}
	if got := providerBase("https://gw.example.test/openai/v1"); got != "https://gw.example.test/openai" {
		t.Errorf("providerBase kept a path wrongly: %q", got)
	}
}

func TestExternalFreeProbeJudging(t *testing.T) {
	tests := []struct {
		code      int
		ok        bool
		throttled bool
	}{
		{200, true, false}, {401, true, false}, {403, true, false}, {404, true, false},
		{429, true, true}, {500, false, false}, {502, false, false}, {503, false, false},
	}
	for _, tc := range tests {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			srv := startServer(t, &headerLog{code: tc.code})
			err := (&ExternalProber{}).Probe(context.Background(), extTarget(srv.URL, "openai"))
			checkJudged(t, err, tc.code, tc.ok, tc.throttled, "")
		})
	}
}

func TestExternalLLMProbeJudging(t *testing.T) {
	tests := []struct {
		code      int
		ok        bool
		throttled bool
		reason    string
	}{
		{200, true, false, ""}, {400, true, false, ""}, {422, true, false, ""},
		{404, false, false, "wrong_endpoint"}, {405, false, false, "wrong_endpoint"},
		{401, false, false, "key_refused"}, {403, false, false, "key_refused"},
		{429, true, true, ""}, {500, false, false, "status 500"}, {503, false, false, "status 503"},
	}
	for _, tc := range tests {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			srv := startServer(t, &headerLog{code: tc.code})
			tg := extTarget(srv.URL, "openai")
			tg.LLMProbeModel = "gpt-4o-mini"
			err := (&ExternalProber{}).Probe(context.Background(), tg)
			checkJudged(t, err, tc.code, tc.ok, tc.throttled, tc.reason)
		})
	}
}

func checkJudged(t *testing.T, err error, code int, ok, throttled bool, reason string) {
	t.Helper()
	isThrottled := errors.Is(err, ErrThrottled)
	healthy := err == nil || isThrottled
	if healthy != ok || isThrottled != throttled {
		t.Fatalf("Probe() = %v; want healthy %v, throttled %v", err, ok, throttled)
	}
	if err == nil {
		return
	}
	var pe *ProbeError
	if !errors.As(err, &pe) || pe.StatusCode != code || (reason != "" && pe.Reason != reason) {
		t.Errorf("error = %#v, want status %d reason %q", pe, code, reason)
	}
	if strings.Contains(err.Error(), "sk-provider-key") {
		t.Errorf("key in error %q", err)
	}
}

func TestExternalLLMProbeRequest(t *testing.T) {
	// The data plane's OpenAI-compatible endpoints (gateway/provider.go), Anthropic's native one.
	for _, tc := range []struct{ provider, base, path, query string }{
		{"openai", "/v1", "/v1/chat/completions", ""},
		{"gemini", "/v1", "/v1beta/openai/chat/completions", ""},
		{"gemini", "/v1beta/openai", "/v1beta/openai/chat/completions", ""},
		{"azure_openai", "", "/openai/deployments/tiny/chat/completions", "api-version=" + AzureAPIVersion},
		{"anthropic", "/v1", "/v1/messages", ""},
	} {
		t.Run(tc.provider+tc.base, func(t *testing.T) {
			var body map[string]any
			var method, path, query string
			srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				method, path, query = r.Method, r.URL.Path, r.URL.RawQuery
				b, _ := io.ReadAll(r.Body)
				json.Unmarshal(b, &body)
			}))
			tg := extTarget(srv.URL+tc.base, tc.provider)
			tg.LLMProbeModel = "tiny"
			if err := (&ExternalProber{}).Probe(context.Background(), tg); err != nil {
				t.Fatal(err)
			}
			if method != http.MethodPost || path != tc.path || query != tc.query {
				t.Errorf("request = %s %s?%s, want POST %s?%s", method, path, query, tc.path, tc.query)
			}
			if body["model"] != "tiny" || body["max_tokens"] != 1.0 {
				t.Errorf("body = %v, want model tiny with max_tokens 1", body)
			}
		})
	}
}

func TestExternalTimeoutAndRefused(t *testing.T) {
	release := make(chan struct{})
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := (&ExternalProber{}).Probe(ctx, extTarget(srv.URL, "openai")); !errors.Is(err, ErrTimeout) {
		t.Errorf("hung provider: %v, want a timeout failure", err)
	}
	err := (&ExternalProber{}).Probe(context.Background(), extTarget("http://127.0.0.1:1", "openai"))
	if err == nil || errors.Is(err, ErrThrottled) {
		t.Errorf("refused connection: %v, want a failure", err)
	}
}

func TestJitterOffset(t *testing.T) {
	for _, iv := range []time.Duration{time.Second, 60 * time.Second, 7 * time.Second} {
		seen := map[time.Duration]bool{}
		for i := range 200 {
			id := worker.NewID("https://provider-"+string(rune('a'+i%26))+".test", i)
			off := JitterOffset(id, iv)
			if off < 0 || off >= iv/4 {
				t.Fatalf("offset %v of %s outside [0, %v)", off, id, iv/4)
			}
			if again := JitterOffset(id, iv); again != off {
				t.Fatalf("offset of %s not stable: %v then %v", id, off, again)
			}
			seen[off] = true
		}
		if len(seen) < 150 {
			t.Errorf("interval %v: only %d distinct offsets for 200 providers", iv, len(seen))
		}
	}
	if got := JitterOffset("w-x", 3); got != 0 {
		t.Errorf("offset with a tiny interval = %v", got)
	}
}

func TestBackoffSweeps(t *testing.T) {
	var got []int
	for n := range 8 {
		got = append(got, backoffSweeps(n))
	}
	if diff := cmp.Diff([]int{0, 1, 2, 4, 8, 8, 8, 8}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
