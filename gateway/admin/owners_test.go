package admin

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// owners GETs /mesh/owners from h and decodes it.
func owners(t *testing.T, h *Handler) (OwnerList, string) {
	t.Helper()
	a := do(h, req{method: "GET", uri: "/mesh/owners"})
	if a.status != 200 || string(a.header.ContentType()) != "application/json" {
		t.Fatalf("GET /mesh/owners: %d %q %s", a.status, a.header.ContentType(), a.body)
	}
	var list OwnerList
	if err := json.Unmarshal([]byte(a.body), &list); err != nil {
		t.Fatalf("not an owner list: %v: %s", err, a.body)
	}
	return list, a.body
}

// TestMeshOwnersFromRaft: one row per raft record, sorted by worker id, with the owner and
// epoch raft holds, the flags, the breaker of a worker this gateway owns ("unknown" for one it
// does not), and the same health state GET /workers shows; never an API key.
func TestMeshOwnersFromRaft(t *testing.T) {
	e := newEnv(t, nil)
	local := e.register(t, `{"url":"http://127.0.0.1:8013","api_key":"sk-very-secret"}`)
	foreign := e.register(t, `{"url":"http://127.0.0.1:8014","owner":"gw-2"}`)
	third := e.register(t, `{"url":"http://127.0.0.1:8015"}`)
	for _, r := range []req{
		{method: "PUT", uri: "/workers/" + foreign.ID, body: `{"disabled":true}`},
		{method: "PUT", uri: "/workers/" + third.ID, body: `{"is_dead":true}`},
	} {
		if a := do(e.h, r); a.status != 200 {
			t.Fatalf("%s %s: %d %s", r.method, r.uri, a.status, a.body)
		}
	}
	testkit.For(t, "the pool to hold the three, flags applied", func() bool {
		f, d := e.pool.Get(worker.ID(foreign.ID)), e.pool.Get(worker.ID(third.ID))
		return len(e.pool.Snapshot().All) == 3 && f != nil && f.Gates()&pool.GateDisabled != 0 && d != nil && d.Gates()&pool.GateDead != 0
	})
	// The local worker's answers through this gateway reported 150 of 200 prompt tokens cached.
	e.pool.Get(worker.ID(local.ID)).ObserveCache(200, 150)
	e.pool.Get(worker.ID(local.ID)).ObservePrediction(1000, 600)
	ratio, predicted := 0.75, 0.6
	rt := fakeRuntime{id: worker.ID(local.ID), st: owned.Status{Health: health.Ready, Breaker: breaker.Snapshot{State: breaker.Open}}}
	h := e.handler(func(c *Config) { c.Runtime = rt })

	list, body := owners(t, h)
	if strings.Contains(body, "sk-very-secret") || strings.Contains(body, "api_key") {
		t.Errorf("the answer carries the API key: %s", body)
	}
	var workers WorkerList
	if err := json.Unmarshal([]byte(do(h, req{method: "GET", uri: "/workers"}).body), &workers); err != nil {
		t.Fatal(err)
	}
	health := map[string]string{}
	for _, r := range workers.Workers {
		health[r.ID] = r.HealthState
		// GET /workers shows the same observed cache as the owners' rows.
		want := &Cache{}
		if r.ID == local.ID {
			want = &Cache{PromptTokens: 200, CachedTokens: 150, HitRatio: &ratio,
				RoutedTextBytes: 1000, PredictedCachedBytes: 600, PredictedHitRatio: &predicted}
		}
		if diff := cmp.Diff(want, r.Cache); diff != "" {
			t.Errorf("GET /workers: cache of %s (-want +got):\n%s", r.ID, diff)
		}
	}
	if !strings.Contains(body, `"cache":{"prompt_tokens":0,"cached_tokens":0,"hit_ratio":null,"routed_text_bytes":0,"predicted_cached_bytes":0,"predicted_hit_ratio":null}`) ||
		!strings.Contains(body, `"cache":{"prompt_tokens":200,"cached_tokens":150,"hit_ratio":0.75,"routed_text_bytes":1000,"predicted_cached_bytes":600,"predicted_hit_ratio":0.6}`) {
		t.Errorf("the answer's cache fields: %s", body)
	}
	want := []Owner{
		{Worker: local.ID, URL: "http://127.0.0.1:8013", Owner: "n1", Region: "eu", Epoch: local.Epoch, HealthState: health[local.ID],
			Breaker: "open", Origin: "local", Cache: &Cache{PromptTokens: 200, CachedTokens: 150, HitRatio: &ratio,
				RoutedTextBytes: 1000, PredictedCachedBytes: 600, PredictedHitRatio: &predicted}},
		{Worker: foreign.ID, URL: "http://127.0.0.1:8014", Owner: "gw-2", Region: "eu", Epoch: foreign.Epoch, HealthState: health[foreign.ID],
			Breaker: BreakerUnknown, Disabled: true, Origin: "mesh", Cache: &Cache{}},
		{Worker: third.ID, URL: "http://127.0.0.1:8015", Owner: "n1", Region: "eu", Epoch: third.Epoch, HealthState: health[third.ID],
			Breaker: BreakerUnknown, IsDead: true, Origin: "local", Cache: &Cache{}},
	}
	sort.Slice(want, func(i, j int) bool { return want[i].Worker < want[j].Worker })
	if diff := cmp.Diff(want, list.Owners); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}
	for _, o := range list.Owners {
		if o.Epoch == 0 || o.HealthState == "" {
			t.Errorf("row %+v: want the raft epoch and a health state", o)
		}
	}
	for _, f := range []string{`"worker"`, `"url"`, `"owner"`, `"epoch"`, `"health_state"`, `"breaker"`, `"disabled"`,
		`"is_dead"`, `"stale":false`, `"origin"`} {
		if !strings.Contains(body, f) {
			t.Errorf("the answer lacks %s: %s", f, body)
		}
	}
}

// TestMeshOwnersFromPool: a gateway without raft lists its pool, as GET /workers does.
func TestMeshOwnersFromPool(t *testing.T) {
	p, w := newPool(t)
	tests := []struct {
		name    string
		runtime Runtime
		breaker string
	}{
		{"no runtime", nil, BreakerUnknown},
		{"runtime", fakeRuntime{id: w.ID, st: owned.Status{Breaker: breaker.Snapshot{State: breaker.HalfOpen}}}, "half_open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(Config{Pool: p, NodeID: "n1", Runtime: tt.runtime, Logger: testkit.Quiet()})
			list, body := owners(t, h)
			want := []Owner{{Worker: string(w.ID), URL: "http://127.0.0.1:8001", Owner: "n1", HealthState: "ready",
				Breaker: tt.breaker, Origin: "local", Cache: &Cache{}}}
			if diff := cmp.Diff(want, list.Owners); diff != "" {
				t.Errorf("owners (-want +got):\n%s", diff)
			}
			if strings.Contains(body, "sk-very-secret") {
				t.Errorf("the answer carries the API key: %s", body)
			}
		})
	}
}

func TestMeshOwnersEmpty(t *testing.T) {
	e := newEnv(t, nil)
	if _, body := owners(t, e.h); body != `{"owners":[]}` {
		t.Errorf("body %s, want {\"owners\":[]}", body)
	}
}

func TestMeshOwnersRefusals(t *testing.T) {
	p, _ := newPool(t)
	open := New(Config{Pool: p, NodeID: "n1", Logger: testkit.Quiet()})
	withKey := New(Config{Pool: p, NodeID: "n1", APIKey: "admin-key", Logger: testkit.Quiet()})
	tests := []struct {
		name   string
		h      *Handler
		r      req
		status int
		code   string
		allow  string
	}{
		{"head", open, req{method: "HEAD"}, 200, "", ""},
		{"post", open, req{method: "POST", body: `{}`}, 405, "method_not_allowed", "GET"},
		{"put", open, req{method: "PUT", body: `{}`}, 405, "method_not_allowed", "GET"},
		{"delete", open, req{method: "DELETE"}, 405, "method_not_allowed", "GET"},
		{"remote without a key", open, req{method: "GET", from: remote}, 403, "forbidden", ""},
		{"missing key", withKey, req{method: "GET"}, 401, "unauthorized", ""},
		{"wrong key", withKey, req{method: "GET", auth: "Bearer nope"}, 401, "unauthorized", ""},
		{"right key, remote", withKey, req{method: "GET", auth: "Bearer admin-key", from: remote}, 200, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.uri = "/mesh/owners"
			a := do(tt.h, tt.r)
			if a.status != tt.status || a.errCode() != tt.code {
				t.Fatalf("%d %s, want %d %s", a.status, a.body, tt.status, tt.code)
			}
			if got := string(a.header.Peek("Allow")); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
			if tt.status != 200 && strings.Contains(a.body, `"owners":`) {
				t.Errorf("a refused request answered rows: %s", a.body)
			}
			if strings.Contains(a.body, "admin-key") {
				t.Errorf("the admin key leaked: %s", a.body)
			}
		})
	}
}
