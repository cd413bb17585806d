package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/reqmeta"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// openBreaker is a circuit that refuses traffic.
type openBreaker struct{}

func (openBreaker) Allow() bool { return false }

// external registers an in-test provider as an external worker of provider (openai when "").
func (e *testEnv) external(h http.HandlerFunc, provider string, mutate ...func(*worker.Spec)) (*httptest.Server, *pool.Worker) {
	e.t.Helper()
	if provider == "" {
		provider = "openai"
	}
	return e.upstream(h, append([]func(*worker.Spec){func(s *worker.Spec) {
		s.ConnectionMode, s.Provider = worker.ModeExternal, provider
	}}, mutate...)...)
}

// errorEnvelope decodes an OpenAI error body.
func errorEnvelope(t *testing.T, body string) (typ string, code any) {
	t.Helper()
	var env struct {
		Error struct {
			Type string `json:"type"`
			Code any    `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return env.Error.Type, env.Error.Code
}

// When every external target of a route is unhealthy, the gateway forwards to one of them
// anyway (Rolter's fail-open, DESIGN.md section 2); engine workers keep answering 503, and an
// operator's disable or quarantine still holds.
func TestExternalRouteFailsOpen(t *testing.T) {
	type target struct {
		external bool
		health   health.State
		open     bool // breaker open
		disabled bool
		dead     bool
	}
	tests := []struct {
		name     string
		targets  []target
		status   int
		code     string // the 503's error code
		served   int    // which target answered (index), when 200
		anyOfExt bool   // any external target may answer
	}{
		{"one external not ready", []target{{external: true, health: health.NotReady}}, 200, "", 0, false},
		{"every external not ready", []target{{external: true, health: health.Failed}, {external: true, health: health.NotReady}}, 200, "", 0, true},
		{"external breaker open", []target{{external: true, open: true}}, 200, "", 0, false},
		{"external pending", []target{{external: true, health: health.Pending}}, 200, "", 0, false},
		{"engine not ready", []target{{health: health.NotReady}}, 503, codeNoWorkers, 0, false},
		{"engine breaker open", []target{{open: true}}, 503, codeNoWorkers, 0, false},
		{"engine down, external down", []target{{health: health.NotReady}, {external: true, health: health.NotReady}}, 200, "", 1, false},
		{"external disabled", []target{{external: true, disabled: true}}, 503, typeUnavailable, 0, false},
		{"external quarantined", []target{{external: true, dead: true}}, 503, typeUnavailable, 0, false},
		{"external draining", []target{{external: true, health: health.Draining}}, 503, typeUnavailable, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			var ws []*pool.Worker
			for i, tg := range tc.targets {
				name := string(rune('a' + i))
				var w *pool.Worker
				if tg.external {
					_, w = e.external(okHandler(name), "openai")
				} else {
					_, w = e.upstream(okHandler(name))
				}
				p := e.gw.Pool()
				if _, err := p.SetHealth(w.ID, tg.health); err != nil {
					t.Fatal(err)
				}
				if _, err := p.SetFlags(w.ID, tg.disabled, tg.dead); err != nil {
					t.Fatal(err)
				}
				if tg.open {
					if err := p.SetBreaker(w.ID, openBreaker{}); err != nil {
						t.Fatal(err)
					}
				}
				ws = append(ws, w)
			}
			status, hdr, body := e.post("/v1/chat/completions", `{"model":"m","messages":[]}`)
			if status != tc.status {
				t.Fatalf("status %d (%s), want %d", status, body, tc.status)
			}
			if tc.status == 503 {
				typ, code := errorEnvelope(t, body)
				if typ != typeUnavailable || code != tc.code {
					t.Fatalf("503 envelope type %q code %v, want %q %q: %s", typ, code, typeUnavailable, tc.code, body)
				}
				return
			}
			if !tc.anyOfExt {
				want := `"served_by":"` + string(rune('a'+tc.served)) + `"`
				if !strings.Contains(body, want) || hdr.Get("X-Mesh-Worker") != string(ws[tc.served].ID) {
					t.Fatalf("answer %s from %s, want it from target %d", body, hdr.Get("X-Mesh-Worker"), tc.served)
				}
			}
		})
	}
}

// capture is a provider that records what it got.
type capture struct {
	mu    sync.Mutex
	reqs  []*http.Request
	body  []string
	reply string
}

func (c *capture) handler(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.body = append(c.body, string(b))
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	reply := c.reply
	if reply == "" {
		reply = `{"ok":true}`
	}
	_, _ = io.WriteString(w, reply)
}

func (c *capture) last(t *testing.T) (*http.Request, string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reqs) == 0 {
		t.Fatal("the provider got no request")
	}
	return c.reqs[len(c.reqs)-1], c.body[len(c.body)-1]
}

// Each provider gets its own auth header and its OpenAI-compatible endpoint: Anthropic's OpenAI
// SDK compatibility endpoint, Azure's deployment path with api-version, Gemini's
// /v1beta/openai/. The body goes as the client sent it.
func TestProviderAuthAndEndpoint(t *testing.T) {
	const key = "sk-provider-secret"
	tests := []struct {
		name, provider, base, route, model string
		path, query                        string
		auth                               map[string]string // header → value ("" must be absent)
	}{
		{"openai", "openai", "/v1", "/v1/chat/completions", "gpt-4o", "/v1/chat/completions", "",
			map[string]string{"Authorization": "Bearer " + key, "X-Api-Key": "", "Api-Key": ""}},
		{"openai base without v1", "openai", "", "/v1/embeddings", "e", "/v1/embeddings", "",
			map[string]string{"Authorization": "Bearer " + key}},
		{"openai_compatible under a path", "openai_compatible", "/api/v1", "/v1/chat/completions", "m", "/api/v1/chat/completions", "",
			map[string]string{"Authorization": "Bearer " + key}},
		{"anthropic", "anthropic", "/v1", "/v1/chat/completions", "claude", "/v1/chat/completions", "",
			map[string]string{"X-Api-Key": key, "Anthropic-Version": "2023-06-01", "Authorization": ""}},
		{"anthropic bare base", "anthropic", "", "/v1/chat/completions", "claude", "/v1/chat/completions", "",
			map[string]string{"X-Api-Key": key, "Authorization": ""}},
		{"azure chat", "azure_openai", "", "/v1/chat/completions", "gpt-4o-prod", "/openai/deployments/gpt-4o-prod/chat/completions", "api-version=" + azureAPIVersion,
			map[string]string{"Api-Key": key, "Authorization": ""}},
		{"azure embeddings under /openai", "azure_openai", "/openai", "/v1/embeddings", "emb", "/openai/deployments/emb/embeddings", "api-version=" + azureAPIVersion,
			map[string]string{"Api-Key": key, "Authorization": ""}},
		{"gemini", "gemini", "", "/v1/chat/completions", "gemini-2.0-flash", "/v1beta/openai/chat/completions", "",
			map[string]string{"X-Goog-Api-Key": key, "Authorization": ""}},
		{"gemini compat base", "gemini", "/v1beta/openai", "/v1/embeddings", "text-embedding-004", "/v1beta/openai/embeddings", "",
			map[string]string{"X-Goog-Api-Key": key, "Authorization": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			var got capture
			srv := httptest.NewServer(http.HandlerFunc(got.handler))
			t.Cleanup(srv.Close)
			e.add(worker.Spec{URL: srv.URL + tc.base, ConnectionMode: worker.ModeExternal, Provider: tc.provider, APIKey: key})
			body := `{"model":"` + tc.model + `","input":"x","messages":[{"role":"user","content":"hi"}]}`
			status, _, answer := e.post(tc.route, body, "Authorization", "Bearer client-key")
			if status != 200 {
				t.Fatalf("status %d: %s", status, answer)
			}
			r, b := got.last(t)
			if r.URL.Path != tc.path || r.URL.RawQuery != tc.query {
				t.Errorf("provider got %s?%s, want %s?%s", r.URL.Path, r.URL.RawQuery, tc.path, tc.query)
			}
			for h, v := range tc.auth {
				if r.Header.Get(h) != v {
					t.Errorf("provider header %s = %q, want %q", h, r.Header.Get(h), v)
				}
			}
			if b != body {
				t.Errorf("provider got body %q, want the client's bytes", b)
			}
			if r.Host != strings.TrimPrefix(srv.URL, "http://") {
				t.Errorf("provider Host = %q", r.Host)
			}
		})
	}
}

// A provider gets what a direct client would send: no X-Mesh-Gateway, no routing keys, no hints
// and no request id the gateway made up. An engine still gets them, also when a retry moves a
// request from a provider to an engine.
func TestProviderGetsNoInternalHeaders(t *testing.T) {
	e := newEnv(t, Config{NodeID: "gw-node-7", Policy: "round_robin"})
	var prov capture
	psrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prov.handler(httptest.NewRecorder(), r)
		w.WriteHeader(http.StatusServiceUnavailable) // every request moves on to the engine
	}))
	t.Cleanup(psrv.Close)
	e.add(worker.Spec{URL: psrv.URL + "/v1", ConnectionMode: worker.ModeExternal, Provider: "azure_openai", APIKey: "sk-azure", Model: "m"})
	var eng capture
	e.upstream(eng.handler, func(s *worker.Spec) { s.Model = "m" })
	for i := range 4 {
		hdr := []string{"X-Mesh-Routing-Key", "user-1", "X-SMG-Routing-Key", "user-1", "X-Mesh-Route-Model", "m",
			"X-Mesh-Custom", "internal", "User-Agent", "OpenAI/Python 1.50", "X-Stainless-Lang", "python"}
		if i == 3 {
			hdr = append(hdr, "X-Request-Id", "client-77")
		}
		status, _, body := e.post("/v1/chat/completions", `{"model":"m","messages":[]}`, hdr...)
		if status != 200 {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
	prov.mu.Lock()
	defer prov.mu.Unlock()
	if len(prov.reqs) == 0 {
		t.Fatal("no request reached the provider: the test shows nothing")
	}
	for i, r := range prov.reqs {
		for name := range r.Header {
			if strings.HasPrefix(name, "X-Mesh-") || strings.HasPrefix(name, "X-Smg-") {
				t.Errorf("provider request %d carried %s: %q", i, name, r.Header.Get(name))
			}
		}
		if id := r.Header.Get("X-Request-Id"); id != "" && id != "client-77" {
			t.Errorf("provider request %d carried a request id the gateway made: %q", i, id)
		}
		if r.Header.Get("User-Agent") != "OpenAI/Python 1.50" || r.Header.Get("X-Stainless-Lang") != "python" {
			t.Errorf("provider request %d lost the client's own headers: %v", i, r.Header)
		}
	}
	eng.mu.Lock()
	defer eng.mu.Unlock()
	for i, r := range eng.reqs {
		if r.URL.Path != "/v1/chat/completions" || r.URL.RawQuery != "" {
			t.Errorf("engine request %d went to %s?%s", i, r.URL.Path, r.URL.RawQuery)
		}
		if r.Header.Get("X-Mesh-Gateway") != "gw-node-7" || r.Header.Get("X-Mesh-Routing-Key") != "user-1" {
			t.Errorf("engine request %d lost the gateway's headers: %v", i, r.Header)
		}
		if r.Header.Get("Api-Key") != "" || r.Header.Get("X-Request-Id") == "" {
			t.Errorf("engine request %d: api-key %q, x-request-id %q", i, r.Header.Get("Api-Key"), r.Header.Get("X-Request-Id"))
		}
	}
}

// newProvider's Host drops a default port, as a direct client's does, and every route maps
// under the provider's OpenAI-compatible base.
func TestNewProvider(t *testing.T) {
	tests := []struct {
		url, kind, host string
		route           reqmeta.Route
		path            string
	}{
		{"https://api.anthropic.com:443/v1", "anthropic", "api.anthropic.com", reqmeta.RouteChat, "/v1/chat/completions"},
		{"https://generativelanguage.googleapis.com:443", "gemini", "generativelanguage.googleapis.com", reqmeta.RouteSpeech, "/v1beta/openai/audio/speech"},
		{"http://127.0.0.1:80/api", "openai_compatible", "127.0.0.1", reqmeta.RouteTranscriptions, "/api/v1/audio/transcriptions"},
		{"https://llm.internal.test:8443/v1", "openai", "llm.internal.test:8443", reqmeta.RouteCompletions, "/v1/completions"},
		{"https://res.openai.azure.com:443", "azure_openai", "res.openai.azure.com", reqmeta.RouteEmbeddings, "/embeddings"},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			p := newProvider(tc.url, tc.kind, "", nil)
			if string(p.host) != tc.host || string(p.paths[tc.route]) != tc.path {
				t.Errorf("host %q path %q, want %q %q", p.host, p.paths[tc.route], tc.host, tc.path)
			}
			if p.authName != "" {
				t.Errorf("a worker without a key got auth header %q", p.authName)
			}
		})
	}
}

// An external provider's breaker hears every failed attempt (SMG), where an engine's hears one
// outcome per request, its last.
func TestExternalCountsEveryAttempt(t *testing.T) {
	tests := []struct {
		name     string
		external bool
		answers  []int // the worker's answers in turn; the last repeats
		want     []int // the outcomes reported for the worker
	}{
		{"external, every attempt fails", true, []int{503}, []int{503, 503, 503}},
		{"external, fails twice then answers", true, []int{502, 500, 200}, []int{502, 500, 200}},
		{"engine, every attempt fails", false, []int{503}, []int{503}},
		{"engine, fails twice then answers", false, []int{502, 500, 200}, []int{200}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{Retry: RetryConfig{MaxAttempts: 3}})
			var mu sync.Mutex
			n := 0
			h := func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				st := tc.answers[min(n, len(tc.answers)-1)]
				n++
				mu.Unlock()
				w.WriteHeader(st)
			}
			var w *pool.Worker
			if tc.external {
				_, w = e.external(h, "openai")
			} else {
				_, w = e.upstream(h)
			}
			e.post("/v1/chat/completions", `{"model":"m","messages":[]}`)
			var got []int
			for _, o := range e.outcomesCopy() {
				if o.worker == w.ID {
					got = append(got, o.status)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("outcomes %v, want %v", got, tc.want)
			}
		})
	}
}
