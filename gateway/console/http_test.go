package console

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func newTestHub(t *testing.T, src Source) *Hub {
	t.Helper()
	h := NewHub(HubConfig{Source: src, Interval: 5 * time.Millisecond})
	t.Cleanup(h.Close)
	return h
}

func baseState() State {
	return State{Node: "gw1",
		Peers: []Peer{{ID: "gw1", Status: "alive", Raft: "leader", Self: true}, {ID: "gw2", Status: "alive", Raft: "voter"}},
		Workers: []Worker{
			{ID: "w1", URL: "http://127.0.0.1:9001", Owner: "gw2", Health: "ready", Breaker: "closed", Routable: true, Hit: -1},
			{ID: "w2", URL: "http://127.0.0.1:9002", Owner: "gw1", Health: "ready", Breaker: "closed", Routable: true, Hit: 0.25},
		}}
}

// TestPageAndAuth: the page and its assets are public and hold no data; the snapshot and the
// stream answer only the admin key; nothing but GET is served.
func TestPageAndAuth(t *testing.T) {
	src := &fakeSource{st: baseState()}
	base := serve(t, New(Config{Hub: newTestHub(t, src), Auth: keyAuth("right")}))

	for _, path := range []string{"/ui", "/ui/", "/ui/app.js", "/ui/app.css", "/ui/grid.js", "/ui/stream.js"} {
		resp := get(t, base+path, "")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(b) == 0 {
			t.Errorf("GET %s: %d (%d bytes)", path, resp.StatusCode, len(b))
		}
		if strings.Contains(string(b), "127.0.0.1:9001") {
			t.Errorf("GET %s without a key shows a worker", path)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
	}
	for _, key := range []string{"", "wrong"} {
		for _, path := range []string{"/ui/api/snapshot", "/ui/api/events"} {
			resp := get(t, base+path, key)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(b), "w1") {
				t.Errorf("GET %s with key %q: %d %s", path, key, resp.StatusCode, b)
			}
		}
	}
	resp := get(t, base+"/ui/api/snapshot", "right")
	var snap snapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil || resp.StatusCode != 200 {
		t.Fatalf("snapshot: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if len(snap.Peers) != 2 || len(snap.Workers) != 2 || snap.Workers[1].Hit != 0.25 || snap.Node != "gw1" {
		t.Errorf("snapshot: %+v", snap)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("snapshot Cache-Control %q", resp.Header.Get("Cache-Control"))
	}

	for _, c := range []struct {
		method, path string
		want         int
	}{{"POST", "/ui/api/snapshot", 405}, {"DELETE", "/ui", 405}, {"GET", "/ui/nope", 404}} {
		req, _ := http.NewRequest(c.method, base+c.path, nil)
		req.Header.Set("Authorization", "Bearer right")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
	var other fasthttp.RequestCtx
	other.Request.SetRequestURI("/uix")
	if New(Config{}).Serve(&other) {
		t.Error("Serve took a request outside /ui")
	}
}

// TestStreamSince: a page that holds the current version (?since=) gets no snapshot, only what
// changes after it; one behind, or from before a restart, gets the whole state first.
func TestStreamSince(t *testing.T) {
	src := &fakeSource{st: baseState()}
	hub := newTestHub(t, src)
	// A short heartbeat: the server notices the test's closed streams at once.
	base := serve(t, New(Config{Hub: hub, Auth: keyAuth("k"), Heartbeat: 20 * time.Millisecond}))
	_, v := hub.Snapshot()

	current := openEventsAt(t, base+"/ui/api/events?since="+versionHeader(v), "k")
	if name, data, _ := current.next(5 * time.Second); name != "comment" {
		t.Fatalf("a page at the current version got %q first: %.80s", name, data)
	}
	src.update(func(s *State) { s.Workers[0].Active = 3 })
	if name, data, _ := current.next(5 * time.Second); name != "delta" || !strings.Contains(data, `"active":3`) {
		t.Fatalf("then %q: %.200s", name, data)
	}
	for _, since := range []string{versionHeader(v), "1"} {
		old := openEventsAt(t, base+"/ui/api/events?since="+since, "k")
		if name, _, _ := old.next(5 * time.Second); name != "snapshot" {
			t.Errorf("a page at version %s, behind the Hub, got %q first", since, name)
		}
	}
}

// TestMethodsAndAuthOrder: a method the console does not serve is 405 with Allow, on the page
// and on the data routes; a path under /ui/api/ answers 401 without the key before anything
// else (405, 404), so that nobody learns the routes without it.
func TestMethodsAndAuthOrder(t *testing.T) {
	base := serve(t, New(Config{Hub: newTestHub(t, &fakeSource{st: baseState()}), Auth: keyAuth("right")}))
	tests := []struct {
		method, path, key string
		status            int
		allow             string
	}{
		{"POST", "/ui/api/snapshot", "right", 405, "GET, HEAD"},
		{"POST", "/ui/api/events", "right", 405, "GET, HEAD"},
		{"DELETE", "/ui/api/snapshot", "right", 405, "GET, HEAD"},
		{"POST", "/ui", "", 405, "GET, HEAD"},
		{"PUT", "/ui/app.js", "", 405, "GET, HEAD"},
		{"GET", "/ui/api/x", "right", 404, ""},
		{"POST", "/ui/api/x", "right", 404, ""},
		{"POST", "/ui/api/snapshot", "", 401, ""},
		{"POST", "/ui/api/events", "wrong", 401, ""},
		{"GET", "/ui/api/x", "", 401, ""},
		{"POST", "/ui/api/x", "", 401, ""},
		{"GET", "/ui/api/", "", 401, ""},
		{"GET", "/ui/api", "", 401, ""},
		{"GET", "/ui/api", "right", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path+" "+tt.key, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, base+tt.path, nil)
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || resp.Header.Get("Allow") != tt.allow {
				t.Fatalf("%d Allow %q %s; want %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"), b, tt.status, tt.allow)
			}
			if code := map[int]string{405: `"code":"method_not_allowed"`, 404: `"code":"not_found"`}[tt.status]; !strings.Contains(string(b), code) {
				t.Errorf("body %s, want %s", b, code)
			}
		})
	}
}
