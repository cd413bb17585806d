package admin

import (
	"encoding/json"
	"testing"

	"github.com/meshgw/meshgw/worker"
)

// TestWorkerIDIsWhatTheRoutesTake: GET /workers carries, next to id, the SGLang-Omni router's
// worker_id, the percent-encoded URL, and the admin routes take it as it comes (Omni's
// inspection snippet reads w["worker_id"] and puts it after /workers/). A data-parallel rank,
// whose URL its siblings share, carries its id.
func TestWorkerIDIsWhatTheRoutesTake(t *testing.T) {
	e := newEnv(t, nil)
	plain := e.register(t, `{"url":"http://127.0.0.1:8013"}`)
	rank := e.register(t, `{"url":"http://127.0.0.1:8014","dp_rank":1}`)
	e.register(t, `{"url":"http://127.0.0.1:8014","dp_rank":0}`)
	a := do(e.h, req{method: "GET", uri: "/workers"})
	var list struct {
		Workers []map[string]any `json:"workers"`
	}
	if err := json.Unmarshal([]byte(a.body), &list); err != nil || a.status != 200 {
		t.Fatalf("GET /workers: %d %s", a.status, a.body)
	}
	want := map[string]string{plain.ID: "http%3A%2F%2F127.0.0.1%3A8013", rank.ID: rank.ID}
	seen := 0
	for _, w := range list.Workers {
		id, _ := w["id"].(string)
		wid, ok := w["worker_id"].(string)
		if !ok {
			t.Fatalf("worker %s has no worker_id: %v", id, w)
		}
		if exp, ok := want[id]; ok {
			seen++
			if wid != exp {
				t.Errorf("worker %s: worker_id %q, want %q", id, wid, exp)
			}
		}
		got := do(e.h, req{method: "GET", uri: "/workers/" + wid})
		if got.status != 200 || got.record(t).ID != id {
			t.Errorf("GET /workers/%s: %d %s, want worker %s", wid, got.status, got.body, id)
		}
		put := do(e.h, req{method: "PUT", uri: "/workers/" + wid, body: `{"disabled":true}`})
		if put.status != 200 || put.record(t).ID != id || !put.record(t).Disabled {
			t.Errorf("PUT /workers/%s: %d %s", wid, put.status, put.body)
		}
	}
	if seen != 2 {
		t.Errorf("listed %d of the 2 workers checked: %s", seen, a.body)
	}
}

// TestNotFoundNamesTheIDAsIs: a 404 names the worker id it did not find as it was sent, rank
// included ("@RANK" is not a URL's user info); a URL's user info, query and fragment are still
// left out.
func TestNotFoundNamesTheIDAsIs(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct{ ref, want string }{
		{"w-1a5caedab0d9@1", "no worker with id or URL w-1a5caedab0d9@1"},
		{"w-1a5caedab0d9%4012", "no worker with id or URL w-1a5caedab0d9@12"},
		{"w-1a5caedab0d9", "no worker with id or URL w-1a5caedab0d9"},
		{"http://user:pw@127.0.0.1:9", "no worker with id or URL http://***@127.0.0.1:9"},
		{"http%3A%2F%2Fuser%3Apw%40127.0.0.1%3A9", "no worker with id or URL http://***@127.0.0.1:9"},
		{"user:pw@127.0.0.1:9", "no worker with id or URL ***@127.0.0.1:9"},
	}
	for _, rank := range []int{-1, 0, 7, 1234} { // the ids package worker makes
		if id := worker.NewID("http://127.0.0.1:8013", rank); !isWorkerID(string(id)) {
			t.Errorf("%s is a worker id", id)
		}
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			a := do(e.h, req{method: "GET", uri: "/workers/" + tt.ref})
			if a.status != 404 || a.errCode() != "worker_not_found" || a.message() != tt.want {
				t.Errorf("%d %s, want 404 %q", a.status, a.body, tt.want)
			}
		})
	}
}
