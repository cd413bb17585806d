package admin

import (
	"encoding/json"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/pool"
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

// serve runs one request through h from remote and returns status and body.
func serve(h *Handler, method, uri, auth string, remote net.IP) (int, string) {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: remote, Port: 40000}, nil)
	if !h.Serve(&ctx) {
		return 0, ""
	}
	return ctx.Response.StatusCode(), string(ctx.Response.Body())
}

var (
	loopback = net.ParseIP("127.0.0.1")
	remote   = net.ParseIP("10.1.2.3")
)

func TestAuth(t *testing.T) {
	p, _ := newPool(t)
	status := func() any { return map[string]string{"node_id": "n1"} }
	noKey := New(Config{Pool: p, NodeID: "n1", Status: status})
	withKey := New(Config{Pool: p, NodeID: "n1", Status: status, APIKey: "admin-key"})
	tests := []struct {
		name   string
		h      *Handler
		auth   string
		from   net.IP
		status int
	}{
		{"no key, loopback", noKey, "", loopback, 200},
		{"no key, remote", noKey, "", remote, 403},
		{"key, missing", withKey, "", loopback, 401},
		{"key, wrong", withKey, "Bearer nope", loopback, 401},
		{"key, wrong scheme", withKey, "admin-key", loopback, 401},
		{"key, right", withKey, "Bearer admin-key", loopback, 200},
		{"key, right, remote", withKey, "Bearer admin-key", remote, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/status", "/workers"} {
				got, body := serve(tt.h, "GET", path, tt.auth, tt.from)
				if got != tt.status {
					t.Errorf("%s: %d %s, want %d", path, got, body, tt.status)
				}
				if strings.Contains(body, "admin-key") {
					t.Errorf("%s: the admin key leaked into %s", path, body)
				}
			}
		})
	}
}

func TestWorkersNeverShowAPIKey(t *testing.T) {
	p, w := newPool(t)
	h := New(Config{Pool: p, NodeID: "n1", Status: func() any { return nil }})
	for _, uri := range []string{"/workers", "/workers?model=m", "/workers/" + string(w.ID), "/workers/" + url.PathEscape(w.URL), "/workers/" + url.QueryEscape(w.URL)} {
		status, body := serve(h, "GET", uri, "", loopback)
		if status != 200 {
			t.Fatalf("%s: %d %s", uri, status, body)
		}
		if strings.Contains(body, "sk-very-secret") || strings.Contains(body, `"api_key"`) {
			t.Errorf("%s leaks the API key: %s", uri, body)
		}
	}
	_, body := serve(h, "GET", "/workers", "", loopback)
	var list WorkerList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	r := list.Workers[0]
	if list.Total != 1 || r.ID != string(w.ID) || r.DisplayID != "127.0.0.1:8001" || r.Owner != "n1" || r.Origin != "local" ||
		r.HealthState != "ready" || !r.Routable || r.Disabled || r.IsDead || !r.HasAPIKey || r.Priority != 50 || r.Cost != 1 {
		t.Errorf("record %+v", r)
	}
	for _, f := range []string{`"epoch":0`, `"stale":false`, `"active_requests":0`, `"capabilities":[`, `"models":["m"]`} {
		if !strings.Contains(body, f) {
			t.Errorf("record lacks %s: %s", f, body)
		}
	}
	if status, _ := serve(h, "GET", "/workers/w-000000000000", "", loopback); status != 404 {
		t.Errorf("unknown worker: %d", status)
	}
	if status, _ := serve(h, "GET", "/workers?model=other", "", loopback); status != 200 {
		t.Errorf("filter: %d", status)
	}
	if status, _ := serve(h, "DELETE", "/workers/"+string(w.ID), "", loopback); status != 405 {
		t.Errorf("DELETE before step 4: %d, want 405", status)
	}
	if got, _ := serve(h, "GET", "/other", "", loopback); got != 0 {
		t.Error("a non-admin path was served")
	}
}
