package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testKey = "s3cret-admin-key"

// call is one request the fake admin API saw.
type call struct {
	Method, Path, Body, Auth string
}

// fakeAdmin fakes the admin API: it answers each "METHOD path" (escaped path, with the query)
// with a canned status and body, and records the requests.
type fakeAdmin struct {
	mu      sync.Mutex
	calls   []call
	answers map[string]canned
}

type canned struct {
	status int
	body   string
}

func (f *fakeAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.calls = append(f.calls, call{r.Method, r.URL.RequestURI(), string(b), r.Header.Get("Authorization")})
	f.mu.Unlock()
	a, ok := f.answers[r.Method+" "+r.URL.RequestURI()+" "+string(b)] // an answer for this body
	if !ok {
		a, ok = f.answers[r.Method+" "+r.URL.RequestURI()]
	}
	if !ok {
		a = canned{404, `{"error": {"message": "no such admin route", "code": "not_found"}}`}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

// runCLI runs meshctl against srv with the test key in the environment.
func runCLI(t *testing.T, srvURL string, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		switch k {
		case "MESHCTL_GATEWAY":
			return srvURL
		case "MESHCTL_ADMIN_KEY":
			return testKey
		}
		return ""
	}
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut, getenv)
	return code, out.String(), errOut.String()
}

const recA = `{"id": "w-3f1c0a9b2d44", "display_id": "127.0.0.1:8013", "url": "http://127.0.0.1:8013",
 "owner": "gw-1", "epoch": 5, "origin": "local", "health_state": "ready", "disabled": false,
 "is_dead": false, "routable": true, "models": ["llama-3"], "priority": 50, "has_api_key": true,
 "breaker": {"state": "closed", "consecutive_failures": 0}, "last_error": "",
 "cache": {"prompt_tokens": 200, "cached_tokens": 150, "hit_ratio": 0.75, "routed_text_bytes": 1000, "predicted_cached_bytes": 800, "predicted_hit_ratio": 0.8}}`

const recB = `{"id": "w-00aa11bb22cc", "display_id": "10.0.0.9:9000", "url": "http://10.0.0.9:9000",
 "owner": "gw-2", "epoch": 7, "health_state": "not_ready", "disabled": true, "is_dead": true,
 "routable": false, "models": [], "discovered_models": ["qwen-7b"], "last_error": "connection refused",
 "cache": {"prompt_tokens": 0, "cached_tokens": 0, "hit_ratio": null}}`

const recADisabled = `{"id": "w-3f1c0a9b2d44", "display_id": "127.0.0.1:8013", "owner": "gw-1",
 "health_state": "ready", "disabled": true, "disabled_reason": "maint", "routable": false, "models": ["llama-3"]}`

// peersAnswer has a field meshctl does not know (http_address), which -o wide shows.
const peersAnswer = `{"peers": [
 {"id": "gw-1", "address": "127.0.0.1:39527", "status": "alive", "raft": "leader", "region": "eu", "color": "blue",
  "version": "1.0.0", "owned": 4, "applied_index": 120, "self": true, "http_address": "127.0.0.1:30000"},
 {"id": "gw-2", "address": "127.0.0.1:39530", "status": "suspect", "raft": "nonvoter", "region": "us", "color": "green",
  "version": "1.0.0", "owned": 2, "applied_index": 118, "http_address": "127.0.0.1:30002"},
 {"id": "gw-3", "address": "127.0.0.1:39533", "status": "foreign", "raft": "", "region": "", "color": "",
  "version": "0.9.0", "owned": 0, "applied_index": 7}]}`

const rebalanceAnswerJSON = `{"dry_run": false, "moves": [
 {"worker": "w-3f1c0a9b2d44", "url": "http://127.0.0.1:8013", "from": "gw-1", "epoch": 5, "to": "gw-4"},
 {"worker": "w-00aa11bb22cc", "url": "http://10.0.0.9:9000", "from": "gw-2", "epoch": 7, "to": "gw-5"}],
 "moved": 2, "skipped": [], "owners": {"gw-1": 3, "gw-2": 3, "gw-3": 2, "gw-4": 2, "gw-5": 2}, "fleet_ack": {"index": 40}}`

const drainAnswerJSON = `{"peers": ["gw-1", "gw-2"], "moved": 6, "stuck": [], "done": true, "states": [
 {"peer": "gw-1", "status": "left", "owned": 0, "stuck": 0, "leader": false, "raft": "", "done": true},
 {"peer": "gw-2", "status": "left", "owned": 0, "stuck": 0, "leader": false, "raft": "", "done": true}],
 "fleet_ack": {"index": 50}}`

func fakeAnswers() map[string]canned {
	enc := "/workers/http%3A%2F%2F127.0.0.1%3A8013"
	return map[string]canned{
		"GET /workers":                           {200, `{"workers": [` + recA + `,` + recB + `], "total": 2}`},
		"GET /workers?model=llama-3":             {200, `{"workers": [` + recA + `], "total": 1}`},
		"GET /workers/w-3f1c0a9b2d44":            {200, recA},
		"GET " + enc:                             {200, recA},
		"POST /workers":                          {201, recA},
		"PUT /workers/w-3f1c0a9b2d44":            {200, recADisabled},
		"PUT " + enc:                             {200, recA},
		"DELETE " + enc:                          {202, `{"id": "w-3f1c0a9b2d44", "status": "draining", "drain_settle_secs": 10}`},
		"DELETE /workers/w-00aa11bb22cc":         {200, `{"id": "w-00aa11bb22cc", "status": "removed", "drain_settle_secs": 0}`},
		"GET /workers/w-000000000000":            {404, `{"error": {"message": "no worker w-000000000000", "code": "worker_not_found"}}`},
		"PUT /workers/w-000000000000":            {404, `{"error": {"message": "no worker w-000000000000", "code": "worker_not_found"}}`},
		"GET /mesh/raft":                         {200, `{"leader": "gw-1", "leader_address": "127.0.0.1:39528", "term": 2, "applied_index": 14, "servers": [{"id": "gw-1", "address": "127.0.0.1:39528", "suffrage": "voter"}, {"id": "gw-2", "address": "127.0.0.1:39530", "suffrage": "nonvoter"}], "voters": 1, "voters_wanted": 2, "fault_tolerant": false}`},
		"GET /mesh/peers":                        {200, peersAnswer},
		"POST /workers/w-3f1c0a9b2d44/transfer":  {200, recA},
		"POST /workers/w-000000000000/transfer":  {404, `{"error": {"message": "gw-9 is not a peer of this mesh", "code": "peer_not_found"}}`},
		"POST /mesh/rebalance":                   {200, rebalanceAnswerJSON},
		"POST /mesh/drain":                       {200, drainAnswerJSON},
		"POST /mesh/drain {\"color\":\"green\"}": {409, `{"error": {"message": "draining gw-2 would leave no alive gateway to take the workers", "code": "no_peer_left"}}`},
		"GET /status":                            {200, `{"node_id": "gw-1", "draining": false, "workers": {"total": 2, "routable": 1}, "admission": {"inflight": 3}}`},
	}
}

func newFake(t *testing.T) (*fakeAdmin, *httptest.Server) {
	f := &fakeAdmin{answers: fakeAnswers()}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func TestRequests(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want call
	}{
		{"list", []string{"workers", "list"}, nil, call{"GET", "/workers", "", ""}},
		{"list model", []string{"workers", "list", "--model", "llama-3"}, nil, call{"GET", "/workers?model=llama-3", "", ""}},
		{"get id", []string{"workers", "get", "w-3f1c0a9b2d44"}, nil, call{"GET", "/workers/w-3f1c0a9b2d44", "", ""}},
		{"get url", []string{"workers", "get", "http://127.0.0.1:8013"}, nil, call{"GET", "/workers/http%3A%2F%2F127.0.0.1%3A8013", "", ""}},
		{"disable", []string{"workers", "disable", "w-3f1c0a9b2d44", "--reason", "maint"}, nil,
			call{"PUT", "/workers/w-3f1c0a9b2d44", `{"disabled":true,"reason":"maint"}`, ""}},
		{"enable url", []string{"workers", "enable", "http://127.0.0.1:8013"}, nil,
			call{"PUT", "/workers/http%3A%2F%2F127.0.0.1%3A8013", `{"disabled":false}`, ""}},
		{"quarantine", []string{"workers", "quarantine", "w-3f1c0a9b2d44"}, nil,
			call{"PUT", "/workers/w-3f1c0a9b2d44", `{"is_dead":true}`, ""}},
		{"unquarantine", []string{"workers", "unquarantine", "w-3f1c0a9b2d44"}, nil,
			call{"PUT", "/workers/w-3f1c0a9b2d44", `{"is_dead":false}`, ""}},
		{"remove", []string{"workers", "remove", "http://127.0.0.1:8013"}, nil,
			call{"DELETE", "/workers/http%3A%2F%2F127.0.0.1%3A8013", "", ""}},
		{"add url only", []string{"workers", "add", "http://127.0.0.1:8013"}, nil,
			call{"POST", "/workers", `{"url":"http://127.0.0.1:8013"}`, ""}},
		{"add flags", []string{"workers", "add", "http://127.0.0.1:8013", "--model", "a,b", "--priority", "80",
			"--label", "tier=gold", "--api-key-env", "WK", "--cost", "2.5", "--capability", "chat"},
			map[string]string{"WK": "sk-worker"},
			call{"POST", "/workers", `{"api_key":"sk-worker","capabilities":["chat"],"cost":2.5,"labels":{"tier":"gold"},"models":["a","b"],"priority":80,"url":"http://127.0.0.1:8013"}`, ""}},
		{"raft", []string{"raft"}, nil, call{"GET", "/mesh/raft", "", ""}},
		{"peers", []string{"peers"}, nil, call{"GET", "/mesh/peers", "", ""}},
		{"status", []string{"status"}, nil, call{"GET", "/status", "", ""}},
		{"transfer", []string{"workers", "transfer", "w-3f1c0a9b2d44", "--to", "gw-2"}, nil,
			call{"POST", "/workers/w-3f1c0a9b2d44/transfer", `{"to":"gw-2"}`, ""}},
		{"rebalance", []string{"rebalance"}, nil, call{"POST", "/mesh/rebalance", `{"dry_run":false}`, ""}},
		{"rebalance dry run", []string{"rebalance", "--dry-run"}, nil, call{"POST", "/mesh/rebalance", `{"dry_run":true}`, ""}},
		{"drain a peer", []string{"drain", "gw-1"}, nil, call{"POST", "/mesh/drain", `{"peer":"gw-1"}`, ""}},
		{"drain a color", []string{"drain", "--color", "blue"}, nil, call{"POST", "/mesh/drain", `{"color":"blue"}`, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFake(t)
			code, _, stderr := runCLI(t, srv.URL, tt.env, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			tt.want.Auth = "Bearer " + testKey
			if diff := cmp.Diff([]call{tt.want}, f.calls); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddSpecFile(t *testing.T) {
	f, srv := newFake(t)
	spec := `{"url": "http://127.0.0.1:8013", "model": "llama-3", "health": {"drain_settle_secs": 10}}`
	path := filepath.Join(t.TempDir(), "w.json")
	if err := os.WriteFile(path, []byte(spec+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, srv.URL, nil, "workers", "add", "--spec", path); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if len(f.calls) != 1 || f.calls[0].Body != spec || f.calls[0].Path != "/workers" {
		t.Fatalf("calls = %+v, want one POST /workers with the file's spec", f.calls)
	}
}

func TestTables(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"drain", []string{"drain", "--color", "blue"}, `
PEER  STATUS  OWNED  LEADER  RAFT  DONE
gw-1  left    0      false   -     true
gw-2  left    0      false   -     true
drained gw-1, gw-2: moved 6 workers
`},
		{"rebalance", []string{"rebalance"}, `
WORKER          URL                    FROM  TO
w-3f1c0a9b2d44  http://127.0.0.1:8013  gw-1  gw-4
w-00aa11bb22cc  http://10.0.0.9:9000   gw-2  gw-5
moved 2 of 2
owners: gw-1=3 gw-2=3 gw-3=2 gw-4=2 gw-5=2
`},
		{"list", []string{"workers", "list"}, `
WORKER          ID              HEALTH     BREAKER  FLAGS          OWNER  ROUTABLE  MODELS      CACHE_HIT  PREDICTED
10.0.0.9:9000   w-00aa11bb22cc  not_ready  -        disabled,dead  gw-2   false     *(qwen-7b)  -          -
127.0.0.1:8013  w-3f1c0a9b2d44  ready      closed   -              gw-1   true      llama-3     75.0%      80.0%
2 workers: 1 routable, 1 disabled
`},
		{"list sorted by health", []string{"workers", "list", "--sort", "HEALTH"}, `
WORKER          ID              HEALTH     BREAKER  FLAGS          OWNER  ROUTABLE  MODELS      CACHE_HIT  PREDICTED
10.0.0.9:9000   w-00aa11bb22cc  not_ready  -        disabled,dead  gw-2   false     *(qwen-7b)  -          -
127.0.0.1:8013  w-3f1c0a9b2d44  ready      closed   -              gw-1   true      llama-3     75.0%      80.0%
2 workers: 1 routable, 1 disabled
`},
		{"list sorted by routable", []string{"workers", "list", "--sort", "routable"}, `
WORKER          ID              HEALTH     BREAKER  FLAGS          OWNER  ROUTABLE  MODELS      CACHE_HIT  PREDICTED
10.0.0.9:9000   w-00aa11bb22cc  not_ready  -        disabled,dead  gw-2   false     *(qwen-7b)  -          -
127.0.0.1:8013  w-3f1c0a9b2d44  ready      closed   -              gw-1   true      llama-3     75.0%      80.0%
2 workers: 1 routable, 1 disabled
`},
		{"list sorted by cache hit", []string{"workers", "list", "--sort", "cache_hit", "--model", "llama-3"}, `
WORKER          ID              HEALTH  BREAKER  FLAGS  OWNER  ROUTABLE  MODELS   CACHE_HIT  PREDICTED
127.0.0.1:8013  w-3f1c0a9b2d44  ready   closed   -      gw-1   true      llama-3  75.0%      80.0%
1 worker: 1 routable
`},
		{"list wide", []string{"workers", "list", "-o", "wide"}, `
WORKER          ID              HEALTH     BREAKER  FLAGS          OWNER  ROUTABLE  MODELS      CACHE_HIT  PREDICTED  URL                    EPOCH  LAST_ERROR          PROMPT_TOKENS  CACHED_TOKENS  ROUTED_BYTES  PREDICTED_BYTES
10.0.0.9:9000   w-00aa11bb22cc  not_ready  -        disabled,dead  gw-2   false     *(qwen-7b)  -          -          http://10.0.0.9:9000   7      connection refused  0              0              0             0
127.0.0.1:8013  w-3f1c0a9b2d44  ready      closed   -              gw-1   true      llama-3     75.0%      80.0%      http://127.0.0.1:8013  5      -                   200            150            1000          800
2 workers: 1 routable, 1 disabled
`},
		{"list wide sorted by epoch", []string{"workers", "list", "-o", "wide", "--sort", "epoch"}, `
WORKER          ID              HEALTH     BREAKER  FLAGS          OWNER  ROUTABLE  MODELS      CACHE_HIT  PREDICTED  URL                    EPOCH  LAST_ERROR          PROMPT_TOKENS  CACHED_TOKENS  ROUTED_BYTES  PREDICTED_BYTES
127.0.0.1:8013  w-3f1c0a9b2d44  ready      closed   -              gw-1   true      llama-3     75.0%      80.0%      http://127.0.0.1:8013  5      -                   200            150            1000          800
10.0.0.9:9000   w-00aa11bb22cc  not_ready  -        disabled,dead  gw-2   false     *(qwen-7b)  -          -          http://10.0.0.9:9000   7      connection refused  0              0              0             0
2 workers: 1 routable, 1 disabled
`},
		{"disable", []string{"workers", "disable", "w-3f1c0a9b2d44"}, `
WORKER          ID              HEALTH  BREAKER  FLAGS     OWNER  ROUTABLE  MODELS   CACHE_HIT  PREDICTED
127.0.0.1:8013  w-3f1c0a9b2d44  ready   -        disabled  gw-1   false     llama-3  -          -
`},
		{"remove draining", []string{"workers", "remove", "http://127.0.0.1:8013"}, `
ID              STATUS    DRAIN_SETTLE
w-3f1c0a9b2d44  draining  10s
`},
		{"remove at once", []string{"workers", "remove", "w-00aa11bb22cc"}, `
ID              STATUS   DRAIN_SETTLE
w-00aa11bb22cc  removed  0s
`},
		{"raft", []string{"raft"}, `
ID    ADDRESS          SUFFRAGE  LEADER  TERM  APPLIED
gw-1  127.0.0.1:39528  voter     *       2     14
gw-2  127.0.0.1:39530  nonvoter  -       2     14
voters 1 of 2: not fault-tolerant (losing one voter stops raft writes)
`},
		{"peers", []string{"peers"}, `
NAME   ADDRESS          STATUS   RAFT      REGION  COLOR  VERSION  OWNED  APPLIED
gw-1*  127.0.0.1:39527  alive    leader    eu      blue   1.0.0    4      120
gw-2   127.0.0.1:39530  suspect  nonvoter  us      green  1.0.0    2      118
gw-3   127.0.0.1:39533  foreign  -         -       -      0.9.0    0      7
3 peers: 1 alive, 1 suspect, 1 foreign, leader gw-1; by region: eu 1 (leader), us 1, no region 1
`},
		{"peers sorted by applied", []string{"peers", "--sort", "applied"}, `
NAME   ADDRESS          STATUS   RAFT      REGION  COLOR  VERSION  OWNED  APPLIED
gw-3   127.0.0.1:39533  foreign  -         -       -      0.9.0    0      7
gw-2   127.0.0.1:39530  suspect  nonvoter  us      green  1.0.0    2      118
gw-1*  127.0.0.1:39527  alive    leader    eu      blue   1.0.0    4      120
3 peers: 1 alive, 1 suspect, 1 foreign, leader gw-1; by region: eu 1 (leader), us 1, no region 1
`},
		{"peers wide", []string{"peers", "-o", "wide"}, `
NAME   ADDRESS          STATUS   RAFT      REGION  COLOR  VERSION  OWNED  APPLIED  LAG  HTTP_ADDRESS
gw-1*  127.0.0.1:39527  alive    leader    eu      blue   1.0.0    4      120      0    127.0.0.1:30000
gw-2   127.0.0.1:39530  suspect  nonvoter  us      green  1.0.0    2      118      2    127.0.0.1:30002
gw-3   127.0.0.1:39533  foreign  -         -       -      0.9.0    0      7        -    -
3 peers: 1 alive, 1 suspect, 1 foreign, leader gw-1; by region: eu 1 (leader), us 1, no region 1
`},
		{"status", []string{"status"}, `
FIELD               VALUE
admission.inflight  3
draining            false
node_id             gw-1
workers.routable    1
workers.total       2
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, srv := newFake(t)
			code, stdout, stderr := runCLI(t, srv.URL, nil, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			if diff := cmp.Diff(strings.TrimPrefix(tt.want, "\n"), trimLines(stdout)); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
		})
	}
}

// trimLines drops the trailing spaces tabwriter leaves on the last column.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

func TestJSONPrintsTheAnswer(t *testing.T) {
	for _, args := range [][]string{
		{"workers", "list"}, {"workers", "get", "w-3f1c0a9b2d44"}, {"workers", "add", "http://127.0.0.1:8013"},
		{"workers", "disable", "w-3f1c0a9b2d44"}, {"workers", "remove", "w-00aa11bb22cc"}, {"raft"}, {"status"}, {"peers"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			f, srv := newFake(t)
			code, stdout, stderr := runCLI(t, srv.URL, nil, append(args, "-o", "json")...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			c := f.calls[0]
			var got, want any
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
			}
			_ = json.Unmarshal([]byte(f.answers[c.Method+" "+c.Path].body), &want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("-o json (-answer +printed):\n%s", diff)
			}
		})
	}
}
