package health

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// targetProber records the targets it was asked to probe.
type targetProber struct {
	mu      sync.Mutex
	targets []Target
}

func (p *targetProber) Probe(_ context.Context, t Target) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.targets = append(p.targets, t)
	return nil
}

// llm_probe_model without an API key: the Checker logs one warning and keeps the free probe
// (Rolter), through updates of the worker too; with a key the completion probe is kept.
func TestLLMProbeWithoutKeyFallsBackToFreeProbe(t *testing.T) {
	for _, key := range []string{"", "sk-provider-key"} {
		t.Run("key="+key, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, logs := &targetProber{}, &syncBuffer{}
				c := newChecker(t, DefaultConfig(), p, nil, func(o *Options) {
					o.Modes = map[string]Mode{worker.ModeExternal: {Prober: p}}
					o.Logger = debugLogger(logs)
				})
				s := worker.Spec{URL: "https://api.example.test/v1", ConnectionMode: worker.ModeExternal, Provider: "openai", APIKey: key,
					Health: &worker.Health{DisableHealthCheck: ptr(false), CheckIntervalSecs: ptr(5), LLMProbeModel: ptr("gpt-4o-mini")}}
				if err := c.Add(s, Pending); err != nil {
					t.Fatal(err)
				}
				testkit.Advance(12 * time.Second)
				s.Health.CheckIntervalSecs = ptr(4) // a PATCH: still no key
				if err := c.Update(s); err != nil {
					t.Fatal(err)
				}
				testkit.Advance(12 * time.Second)
				synctest.Wait()
				want := "gpt-4o-mini"
				if key == "" {
					want = ""
				}
				p.mu.Lock()
				n := len(p.targets)
				for i, tg := range p.targets {
					if tg.LLMProbeModel != want {
						t.Errorf("probe %d: LLMProbeModel %q, want %q", i, tg.LLMProbeModel, want)
					}
				}
				p.mu.Unlock()
				if n < 4 {
					t.Fatalf("only %d probes", n)
				}
				warns := strings.Count(logs.String(), "level=WARN")
				if key == "" && (warns != 1 || !strings.Contains(logs.String(), "llm_probe_model")) {
					t.Errorf("%d warnings, want one naming llm_probe_model:\n%s", warns, logs.String())
				}
				if key != "" && warns != 0 {
					t.Errorf("warnings with a key:\n%s", logs.String())
				}
				if strings.Contains(logs.String(), "sk-provider-key") {
					t.Error("the API key reached the log")
				}
			})
		})
	}
}

// The prober itself never sends an unauthenticated completion: without a key it sends the
// free probe.
func TestExternalProberLLMProbeNeedsKey(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	tg := extTarget(srv.URL, "openai")
	tg.APIKey, tg.LLMProbeModel = "", "gpt-4o-mini"
	if err := (&ExternalProber{}).Probe(context.Background(), tg); err != nil {
		t.Fatalf("free probe answered 401: %v, want healthy", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "GET /v1/models" {
		t.Fatalf("provider got %v, want the free probe", got)
	}
}
