package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// adminClient calls a gateway's admin API.
type adminClient struct {
	base, key string
	client    *http.Client
}

func newAdmin(gw *harness.Gateway, key string) *adminClient {
	return &adminClient{base: gw.URL, key: key, client: &http.Client{Timeout: 15 * time.Second}}
}

// do sends one admin request and returns the status and body.
func (a *adminClient) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if a.key != "" {
		req.Header.Set("Authorization", "Bearer "+a.key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// must sends a request that must answer want.
func (a *adminClient) must(t *testing.T, want int, method, path, body string) string {
	t.Helper()
	code, got := a.do(t, method, path, body)
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, got, want)
	}
	return got
}

// adminRecord is what the tests read of a worker record.
type adminRecord struct {
	ID             string            `json:"id"`
	URL            string            `json:"url"`
	Owner          string            `json:"owner"`
	Epoch          uint64            `json:"epoch"`
	HealthState    string            `json:"health_state"`
	Disabled       bool              `json:"disabled"`
	DisabledReason string            `json:"disabled_reason"`
	DisabledBy     string            `json:"disabled_by"`
	DisabledAt     string            `json:"disabled_at"`
	IsDead         bool              `json:"is_dead"`
	Routable       bool              `json:"routable"`
	RegisteredAt   string            `json:"registered_at"`
	Revision       uint64            `json:"revision"`
	Priority       int               `json:"priority"`
	Labels         map[string]string `json:"labels"`
	HasAPIKey      bool              `json:"has_api_key"`
}

// list returns GET /workers by URL, failing on a record that shows an API key.
func (a *adminClient) list(t *testing.T) map[string]adminRecord {
	t.Helper()
	body := a.must(t, 200, "GET", "/workers", "")
	if strings.Contains(body, `"api_key"`) {
		t.Fatalf("GET /workers shows an api_key: %s", body)
	}
	var l struct {
		Workers []adminRecord `json:"workers"`
		Total   int           `json:"total"`
	}
	if err := json.Unmarshal([]byte(body), &l); err != nil || l.Total != len(l.Workers) {
		t.Fatalf("GET /workers: %v %s", err, body)
	}
	out := make(map[string]adminRecord, len(l.Workers))
	for _, r := range l.Workers {
		out[r.URL] = r
	}
	return out
}

func errorCode(body string) string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &e)
	return e.Error.Code
}

// workerPath is /workers/ and the percent-encoded URL of an engine.
func workerPath(e *harness.Proc) string { return "/workers/" + url.PathEscape(e.URL) }

// TestAdminAPI drives the admin API of a real gateway with a bearer key: auth, registration,
// routing to what was registered, PATCH, flags, the 400 that changes nothing, DELETE's drain,
// /mesh/raft, the metrics of raft writes, and no secret in any answer or log line.
func TestAdminAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	e1 := harness.StartEngine(t, b, "engine-1")
	e2 := harness.StartEngine(t, b, "engine-2")
	const key, workerKey = "sk-admin-e2e", "sk-worker-e2e-secret"
	gw := harness.StartGateway(t, b, "meshgw", "--node-id", "gw-admin", "--admin-api-key", key,
		"--health-check-interval-secs", "1", "--drain-settle-secs", "1", "--log-level", "debug")
	adm := newAdmin(gw, key)

	for _, tt := range []struct{ name, key string }{{"missing key", ""}, {"wrong key", "sk-wrong"}} {
		code, body := newAdmin(gw, tt.key).do(t, "GET", "/workers", "")
		if code != 401 || errorCode(body) != "unauthorized" {
			t.Errorf("%s: %d %s", tt.name, code, body)
		}
	}
	harness.WaitFor(t, 20*time.Second, "raft to accept writes", func() bool {
		code, _ := adm.do(t, "POST", "/workers", fmt.Sprintf(`{"url":%q,"api_key":%q}`, e1.URL, workerKey))
		return code == 201
	})
	adm.must(t, 200, "POST", "/workers", fmt.Sprintf(`{"url":%q,"api_key":%q}`, e1.URL, workerKey))
	if code, body := adm.do(t, "POST", "/workers", fmt.Sprintf(`{"url":%q,"priority":1}`, e1.URL)); code != 409 || errorCode(body) != "worker_exists" {
		t.Errorf("other spec: %d %s", code, body)
	}
	if code, body := adm.do(t, "POST", "/workers", fmt.Sprintf(`{"url":%q,"cost":-1}`, e2.URL)); code != 400 || !strings.Contains(body, "cost") {
		t.Errorf("bad field: %d %s", code, body)
	}
	adm.must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, e2.URL))
	big := `{"url":"http://127.0.0.1:1","labels":{"x":"` + strings.Repeat("y", 2<<20) + `"}}`
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(big)
		if chunked {
			body = io.MultiReader(body) // no length: sent chunked
		}
		req, _ := http.NewRequest("POST", gw.URL+"/workers", body)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := adm.client.Do(req)
		if err != nil {
			t.Fatalf("oversized body (chunked %v): %v", chunked, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || errorCode(string(b)) != "payload_too_large" {
			t.Errorf("oversized body (chunked %v): %d %.200s", chunked, resp.StatusCode, b)
		}
	}
	gw.WaitReady(t, 20*time.Second)
	client := &http.Client{Timeout: 10 * time.Second}
	if code, _, err := chat(client, gw.URL, "registered through the API"); err != nil || code != 200 {
		t.Fatalf("chat: %d %v", code, err)
	}

	// PATCH merges; a refused PATCH leaves the record as it was.
	before := adm.list(t)[e1.URL]
	body := adm.must(t, 200, "PATCH", workerPath(e1), `{"priority":9,"labels":{"tier":"gold"}}`)
	var patched adminRecord
	_ = json.Unmarshal([]byte(body), &patched)
	if patched.Priority != 9 || patched.Labels["tier"] != "gold" || !patched.HasAPIKey || patched.Revision <= before.Revision {
		t.Errorf("patched %+v", patched)
	}
	if code, body := adm.do(t, "PATCH", workerPath(e1), `{"priority":3,"health":{"timeout_secs":0}}`); code != 400 || !strings.Contains(body, "health.timeout_secs") {
		t.Errorf("bad PATCH: %d %s", code, body)
	}
	if after := adm.list(t)[e1.URL]; after.Revision != patched.Revision || after.Priority != 9 {
		t.Errorf("a refused PATCH changed the record: %+v", after)
	}

	// Disabling both takes them out of routing; enabling one brings it back.
	adm.must(t, 200, "PUT", workerPath(e1), `{"disabled":true,"reason":"e2e"}`)
	adm.must(t, 200, "PUT", "/workers/"+adm.list(t)[e2.URL].ID, `{"disabled":true}`)
	harness.WaitFor(t, 10*time.Second, "no routable worker", func() bool { code, _, _ := chat(client, gw.URL, "x"); return code == 503 })
	adm.must(t, 200, "PUT", workerPath(e1), `{"disabled":false}`)
	harness.WaitFor(t, 10*time.Second, "e1 to route again", func() bool { code, _, _ := chat(client, gw.URL, "x"); return code == 200 })

	// DELETE of a ready worker drains it for --drain-settle-secs, then its owner removes it.
	var del struct {
		Status          string  `json:"status"`
		DrainSettleSecs float64 `json:"drain_settle_secs"`
	}
	_ = json.Unmarshal([]byte(adm.must(t, 202, "DELETE", workerPath(e1), "")), &del)
	if del.Status != "draining" || del.DrainSettleSecs != 1 {
		t.Errorf("DELETE: %+v", del)
	}
	harness.WaitFor(t, 10*time.Second, "the drained worker to be removed", func() bool { code, _ := adm.do(t, "GET", workerPath(e1), ""); return code == 404 })
	// The record is gone: a second DELETE is 404.
	if code, body := adm.do(t, "DELETE", workerPath(e1), ""); code != 404 || errorCode(body) != "worker_not_found" {
		t.Errorf("second DELETE: %d %s", code, body)
	}

	var info struct {
		Leader  string `json:"leader"`
		Term    uint64 `json:"term"`
		Applied uint64 `json:"applied_index"`
		Servers []struct {
			ID, Address, Suffrage string
		} `json:"servers"`
	}
	_ = json.Unmarshal([]byte(adm.must(t, 200, "GET", "/mesh/raft", "")), &info)
	if info.Leader != "gw-admin" || info.Term == 0 || info.Applied == 0 || len(info.Servers) != 1 || info.Servers[0].Suffrage != "voter" {
		t.Errorf("/mesh/raft %+v", info)
	}

	metrics := scrapeMetrics(t, gw)
	for _, series := range []string{`meshgw_raft_leader 1`, `meshgw_raft_apply_duration_seconds_count{command="register"}`, `meshgw_raft_apply_duration_seconds_count{command="set_flags"}`} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	out := gw.Output()
	if !regexp.MustCompile(`msg="admin write" component=admin method=PUT id=w-\w+ by=127.0.0.1 outcome=updated`).MatchString(out) {
		t.Errorf("no admin write line in the gateway's log")
	}
	for _, secret := range []string{key, workerKey} {
		if strings.Contains(out, secret) || strings.Contains(metrics, secret) {
			t.Errorf("a secret reached the log or the metrics")
		}
	}
}

// scrapeMetrics returns the gateway's /metrics text.
func scrapeMetrics(t *testing.T, gw *harness.Gateway) string {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(gw.MetricsPort) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
