package gateway

import (
	"encoding/json"
	"testing"
)

// A worker whose circuit is open is not routable (DESIGN.md section 2): GET /workers, /status
// and /readiness count it out, as the data plane does.
func TestRoutableCountsTheBreaker(t *testing.T) {
	e := newEnv(t, Config{})
	_, open := e.upstream(okHandler("open"))
	if err := e.gw.Pool().SetBreaker(open.ID, openBreaker{}); err != nil {
		t.Fatal(err)
	}
	e.gw.refreshReadiness() // what the readiness loop does every second

	if status, _, body := e.post("/v1/chat/completions", `{"model":"m","messages":[]}`); status != 503 {
		t.Fatalf("the data plane answered %d %s for a worker whose circuit is open", status, body)
	}
	var st struct {
		Workers struct {
			Total    int `json:"total"`
			Routable int `json:"routable"`
		} `json:"workers"`
	}
	getJSON(t, e, "/status", &st)
	if st.Workers.Total != 1 || st.Workers.Routable != 0 {
		t.Errorf("/status workers = %+v, want 1 total and 0 routable", st.Workers)
	}
	var ready struct {
		Status         string `json:"status"`
		HealthyWorkers int    `json:"healthy_workers"`
	}
	status, _, body := e.get("/readiness")
	if err := json.Unmarshal([]byte(body), &ready); err != nil {
		t.Fatal(err)
	}
	if status != 503 || ready.HealthyWorkers != 0 {
		t.Errorf("/readiness = %d %s, want 503 with no healthy worker", status, body)
	}
	var list struct {
		Workers []struct {
			Routable bool `json:"routable"`
		} `json:"workers"`
	}
	getJSON(t, e, "/workers", &list)
	if len(list.Workers) != 1 || list.Workers[0].Routable {
		t.Errorf("GET /workers = %+v, want the one worker not routable", list.Workers)
	}

	_, _ = e.upstream(okHandler("closed")) // a second worker, circuit closed
	e.gw.refreshReadiness()
	getJSON(t, e, "/status", &st)
	if st.Workers.Total != 2 || st.Workers.Routable != 1 {
		t.Errorf("/status workers = %+v, want 2 total and 1 routable", st.Workers)
	}
	if status, _, body := e.get("/readiness"); status != 200 {
		t.Errorf("/readiness = %d %s with one routable worker", status, body)
	}
}

func getJSON(t *testing.T, e *testEnv, path string, v any) {
	t.Helper()
	status, _, body := e.get(path)
	if status != 200 {
		t.Fatalf("GET %s = %d %s", path, status, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}
