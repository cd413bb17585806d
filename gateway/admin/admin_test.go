package admin

import (
	"encoding/json"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

func newPool(t *testing.T) (*pool.Pool, *pool.Worker) {
	t.Helper()
	p := pool.New(pool.Config{})
	w, _, err := p.Upsert(worker.Spec{URL: "http://127.0.0.1:8001", APIKey: "sk-very-secret", Models: []string{"m"}}, pool.OriginLocal)
	if err != nil {
		t.Fatal(err)
	}
	return p, w
}

func TestAuth(t *testing.T) {
	p, w := newPool(t)
	status := func() any { return map[string]string{"node_id": "n1"} }
	noKey := New(Config{Pool: p, NodeID: "n1", Status: status, Logger: testkit.Quiet()})
	withKey := New(Config{Pool: p, NodeID: "n1", Status: status, APIKey: "admin-key", Logger: testkit.Quiet()})
	// A rotation: the new key first, the old one after it (--admin-api-key-file).
	twoKeys := New(Config{Pool: p, NodeID: "n1", Status: status, APIKey: "new-key\r\nadmin-key\n", Logger: testkit.Quiet()})
	tests := []struct {
		name   string
		h      *Handler
		auth   string
		from   net.IP
		status int
		code   string
	}{
		{"no key, loopback", noKey, "", loopback, 200, ""},
		{"no key, remote", noKey, "", remote, 403, "forbidden"},
		{"key, missing", withKey, "", loopback, 401, "unauthorized"},
		{"key, wrong", withKey, "Bearer nope", loopback, 401, "unauthorized"},
		{"key, wrong length", withKey, "Bearer admin-key-and-more", loopback, 401, "unauthorized"},
		{"key, wrong scheme", withKey, "admin-key", loopback, 401, "unauthorized"},
		{"key, right", withKey, "Bearer admin-key", loopback, 200, ""},
		{"key, right, remote", withKey, "Bearer admin-key", remote, 200, ""},
		{"two keys, the first", twoKeys, "Bearer new-key", remote, 200, ""},
		{"two keys, the second", twoKeys, "Bearer admin-key", remote, 200, ""},
		{"two keys, both at once", twoKeys, "Bearer new-key\nadmin-key", remote, 401, "unauthorized"},
		{"two keys, neither", twoKeys, "Bearer nope", remote, 401, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// GET /status is a status endpoint: it answers whoever asks.
			if a := do(tt.h, req{method: "GET", uri: "/status", auth: tt.auth, from: tt.from}); a.status != 200 {
				t.Errorf("GET /status: %d %s, want 200 without admin auth", a.status, a.body)
			}
			// Every admin route and method but GET /status answers 401 without the key or with
			// a wrong one, for reads and for writes.
			for _, r := range []req{
				{method: "GET", uri: "/workers"},
				{method: "GET", uri: "/workers/" + string(w.ID)},
				{method: "GET", uri: "/mesh/raft"},
				{method: "GET", uri: "/mesh/peers"},
				{method: "GET", uri: "/mesh/owners"},
				{method: "GET", uri: "/weight_update_journal"},
				// Writes are refused before anything else happens, body unread.
				{method: "POST", uri: "/workers", body: `{"url":"http://127.0.0.1:9"}`},
				{method: "PUT", uri: "/workers/" + string(w.ID), body: `{"disabled":true}`},
				{method: "PATCH", uri: "/workers/" + string(w.ID), body: `{"labels":{"a":"b"}}`},
				{method: "DELETE", uri: "/workers/" + string(w.ID)},
				{method: "POST", uri: "/update_weights_from_disk", body: `{"model_path":"/m"}`},
				{method: "POST", uri: "/weight_update_journal/resolve", body: `{"acknowledge":true}`},
				{method: "POST", uri: "/workers/" + string(w.ID) + "/transfer", body: `{"to":"n2"}`},
				{method: "POST", uri: "/mesh/rebalance", body: `{"dry_run":true}`},
				{method: "POST", uri: "/mesh/drain", body: `{"peer":"n2"}`},
				{method: "GET", uri: "/mesh/drain"},
			} {
				r.auth, r.from = tt.auth, tt.from
				a := do(tt.h, r)
				want := tt.status
				if want == 200 && (r.method != "GET" || r.uri == "/mesh/raft" || r.uri == "/mesh/peers" || r.uri == "/mesh/drain") {
					want = 503 // authorized, but this handler has no raft node and no mesh
				}
				if a.status != want || (tt.code != "" && a.errCode() != tt.code) {
					t.Errorf("%s %s: %d %s, want %d %s", r.method, r.uri, a.status, a.body, want, tt.code)
				}
				if strings.Contains(a.body, "admin-key") {
					t.Errorf("%s: the admin key leaked into %s", r.uri, a.body)
				}
				if tt.status == 401 && a.header.Peek("WWW-Authenticate") == nil {
					t.Errorf("%s: 401 without WWW-Authenticate", r.uri)
				}
			}
		})
	}
}

// TestReadOnlyWithoutRaft: on a gateway without a raft node the routes read the pool, never
// show the API key, and refuse writes with 503 unavailable.
func TestReadOnlyWithoutRaft(t *testing.T) {
	p, w := newPool(t)
	h := New(Config{Pool: p, NodeID: "n1", Status: func() any { return nil }, Logger: testkit.Quiet()})
	for _, uri := range []string{"/workers", "/workers?model=m", "/workers/" + string(w.ID), "/workers/" + url.PathEscape(w.URL), "/workers/" + url.QueryEscape(w.URL)} {
		a := do(h, req{method: "GET", uri: uri})
		if a.status != 200 {
			t.Fatalf("%s: %d %s", uri, a.status, a.body)
		}
		if strings.Contains(a.body, "sk-very-secret") || strings.Contains(a.body, `"api_key"`) {
			t.Errorf("%s leaks the API key: %s", uri, a.body)
		}
	}
	a := do(h, req{method: "GET", uri: "/workers"})
	var list WorkerList
	if err := json.Unmarshal([]byte(a.body), &list); err != nil {
		t.Fatal(err)
	}
	r := list.Workers[0]
	if list.Total != 1 || r.ID != string(w.ID) || r.DisplayID != "127.0.0.1:8001" || r.Owner != "n1" || r.Origin != "local" ||
		r.HealthState != "ready" || !r.Routable || r.Disabled || r.IsDead || !r.HasAPIKey || r.Priority != 50 || r.Cost != 1 {
		t.Errorf("record %+v", r)
	}
	for _, f := range []string{`"epoch":0`, `"stale":false`, `"active_requests":0`, `"capabilities":[`, `"models":["m"]`} {
		if !strings.Contains(a.body, f) {
			t.Errorf("record lacks %s: %s", f, a.body)
		}
	}
	if a := do(h, req{method: "GET", uri: "/workers/w-000000000000"}); a.status != 404 || a.errCode() != "worker_not_found" {
		t.Errorf("unknown worker: %d %s", a.status, a.body)
	}
	if a := do(h, req{method: "GET", uri: "/workers?model=other"}); a.status != 200 || !strings.Contains(a.body, `"total":0`) {
		t.Errorf("filter: %d %s", a.status, a.body)
	}
	if a := do(h, req{method: "PUT", uri: "/workers/" + string(w.ID), body: `{"disabled":true}`}); a.status != 503 || a.errCode() != "unavailable" {
		t.Errorf("write without raft: %d %s", a.status, a.body)
	}
	if a := do(h, req{method: "GET", uri: "/mesh/raft"}); a.status != 503 {
		t.Errorf("/mesh/raft without raft: %d", a.status)
	}
	if a := do(h, req{method: "GET", uri: "/other"}); a.status != 0 {
		t.Error("a non-admin path was served")
	}
}

// TestMethodsAndRoutes: every route answers 405 with an Allow header for a method it does not
// serve, and a sub-route that does not exist is 404.
func TestMethodsAndRoutes(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.register(t, `{"url":"http://127.0.0.1:8001"}`)
	tests := []struct {
		method, uri string
		status      int
		code, allow string
	}{
		{"DELETE", "/workers", 405, "method_not_allowed", "GET, POST"},
		{"PATCH", "/workers", 405, "method_not_allowed", "GET, POST"},
		{"POST", "/workers/" + rec.ID, 405, "method_not_allowed", "GET, PUT, PATCH, DELETE"},
		{"POST", "/status", 405, "method_not_allowed", "GET"},
		{"PUT", "/mesh/raft", 405, "method_not_allowed", "GET"},
		{"HEAD", "/workers", 200, "", ""},
		{"GET", "/workers/" + rec.ID + "/transfer", 405, "method_not_allowed", "POST"},
		{"GET", "/workers/", 404, "not_found", ""},
		{"POST", "/workers/" + rec.ID + "/nope", 404, "not_found", ""},
		{"POST", "/workers/" + rec.ID + "/transfer", 503, "unavailable", ""}, // this env moves no workers
		{"PUT", "/mesh/drain", 405, "method_not_allowed", "GET, POST"},
		{"GET", "/mesh/rebalance", 405, "method_not_allowed", "POST"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.uri, func(t *testing.T) {
			a := do(e.h, req{method: tt.method, uri: tt.uri})
			if a.status != tt.status || a.errCode() != tt.code {
				t.Fatalf("%d %s, want %d %s", a.status, a.body, tt.status, tt.code)
			}
			if got := string(a.header.Peek("Allow")); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
		})
	}
}

// TestMeshRaft: GET /mesh/raft shows the leader, term, applied index and the configuration.
func TestMeshRaft(t *testing.T) {
	e := newEnv(t, nil)
	e.register(t, `{"url":"http://127.0.0.1:8001"}`)
	a := do(e.h, req{method: "GET", uri: "/mesh/raft"})
	var info struct {
		Leader       string `json:"leader"`
		Term         uint64 `json:"term"`
		AppliedIndex uint64 `json:"applied_index"`
		Servers      []struct {
			ID, Address, Suffrage string
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(a.body), &info); err != nil || a.status != 200 {
		t.Fatalf("%d %s: %v", a.status, a.body, err)
	}
	if info.Leader != "n1" || info.Term == 0 || info.AppliedIndex < 2 || len(info.Servers) != 1 ||
		info.Servers[0].ID != "n1" || info.Servers[0].Address != "mem-n1" || info.Servers[0].Suffrage != "voter" {
		t.Errorf("raft info %+v", info)
	}
}
