package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/meshgw/meshgw/gateway/pool"
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
		health   pool.Health
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
		{"one external not ready", []target{{external: true, health: pool.HealthNotReady}}, 200, "", 0, false},
		{"every external not ready", []target{{external: true, health: pool.HealthFailed}, {external: true, health: pool.HealthNotReady}}, 200, "", 0, true},
		{"external breaker open", []target{{external: true, open: true}}, 200, "", 0, false},
		{"external pending", []target{{external: true, health: pool.HealthPending}}, 200, "", 0, false},
		{"engine not ready", []target{{health: pool.HealthNotReady}}, 503, codeNoWorkers, 0, false},
		{"engine breaker open", []target{{open: true}}, 503, codeNoWorkers, 0, false},
		{"engine down, external down", []target{{health: pool.HealthNotReady}, {external: true, health: pool.HealthNotReady}}, 200, "", 1, false},
		{"external disabled", []target{{external: true, disabled: true}}, 503, typeUnavailable, 0, false},
		{"external quarantined", []target{{external: true, dead: true}}, 503, typeUnavailable, 0, false},
		{"external draining", []target{{external: true, health: pool.HealthDraining}}, 503, typeUnavailable, 0, false},
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
			status, _, body := e.post("/v1/chat/completions", `{"model":"m","messages":[]}`)
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
				if !strings.Contains(body, want) {
					t.Fatalf("answer %s, want it from target %d", body, tc.served)
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
