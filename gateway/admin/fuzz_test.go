package admin

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// FuzzDecodeWorkerRequest feeds arbitrary bytes to the decoders of the admin write bodies
// (POST's registration, PUT's flags or full spec, PATCH's merge): none may panic, every refusal
// is a 4xx with a code, and every spec they accept is normalized (Normalize changes nothing and
// finds nothing wrong) and encodes as a raft command.
func FuzzDecodeWorkerRequest(f *testing.F) {
	for _, seed := range []string{
		`{"url":"http://127.0.0.1:8001"}`,
		`{"url":"HTTP://Host:80/","model":"m","models":["a","b"],"capabilities":["CHAT","streaming"],"api_key":"k","owner":"n2"}`,
		`{"url":"https://api.openai.com/v1","connection_mode":"external","provider":"openai","health":{"disable_health_check":false,"llm_probe_model":"x"}}`,
		`{"url":"grpc://10.0.0.1:50051","dp_rank":3,"resilience":{"capacity_status_codes":[429],"max_retries":2}}`,
		`{"disabled":true,"reason":"maint"}`,
		`{"is_dead":false}`,
		`{"priority":7,"labels":{"a":null,"b":"c"},"health":{"timeout_secs":null},"disabled":false}`,
		`{"cost":1e308,"priority":-1}`,
		`{"labels":{"":"x"}}`,
		`{"url":"ipc:///tmp/sock"}`,
		`[]`, `null`, `{"url":1}`, `{"health":[]}`, "{\"model\":\"\xff\"}",
		"{\"url\":\"http://127.0.0.1:8001\",\"model\":\"m\xff\"}",
		"{\"url\":\"http://127.0.0.1:8001\",\"labels\":{\"\xc3\":\"v\"}}",
		`{"url":"http://127.0.0.1:8001","region":"\ud800"}`,
		"{\"disabled\":true,\"reason\":\"\xed\xa0\x80\"}",
		`{"url":"http://` + strings.Repeat("a", 10000) + `:8001"}`,
		`{"url":"http://` + strings.Repeat("a.", 126) + `a:8001"}`,
	} {
		f.Add([]byte(seed))
	}
	cur := worker.Spec{URL: "http://127.0.0.1:8001", APIKey: "sk", Labels: map[string]string{"a": "1"}, Health: &worker.Health{TimeoutSecs: ptr(3)}}
	if err := cur.Normalize(); err != nil {
		f.Fatal(err)
	}
	rec := fsm.Record{ID: cur.ID(), Spec: cur}
	f.Fuzz(func(t *testing.T, body []byte) {
		// A body that is not valid UTF-8 is refused whole: JSON decoding would store U+FFFD.
		text := func(what string) {
			if !utf8.Valid(body) {
				t.Fatalf("%s accepted a body that is not valid UTF-8: %q", what, body)
			}
		}
		if s, _, e := parseRegistration(body, "eu"); checkRefusal(t, e) {
			text("POST")
			checkAccepted(t, s)
		}
		if _, patch, e := parsePatch(body); checkRefusal(t, e) {
			text("PATCH")
			if s, e := mergeSpec(cur, patch); checkRefusal(t, e) {
				checkAccepted(t, s)
			}
		}
		if _, spec, e := parsePut(body); checkRefusal(t, e) {
			text("PUT")
			if spec == nil {
				return
			}
			if s, e := specFromPut(spec, rec, "eu"); checkRefusal(t, e) {
				checkAccepted(t, s)
				if s.ID() != rec.ID {
					t.Fatalf("a PUT for %s accepted a spec of %s", rec.ID, s.ID())
				}
			}
		}
	})
}

// checkRefusal reports whether e is nil, and fails on a refusal that is not a 4xx with a code.
func checkRefusal(t *testing.T, e *apiError) bool {
	t.Helper()
	if e == nil {
		return true
	}
	if e.status < 400 || e.status > 499 || e.code == "" || e.msg == "" {
		t.Fatalf("refusal %d %q %q", e.status, e.code, e.msg)
	}
	return false
}

func checkAccepted(t *testing.T, s worker.Spec) {
	t.Helper()
	again := s.Clone()
	if err := again.Normalize(); err != nil {
		t.Fatalf("an accepted spec does not normalize: %v (%+v)", err, s)
	}
	if !reflect.DeepEqual(again, s) {
		t.Fatalf("an accepted spec was not normalized:\n%+v\n%+v", s, again)
	}
	if u, err := url.Parse(s.URL); err != nil || len(u.Hostname()) > worker.MaxHostLen {
		t.Fatalf("an accepted spec has a URL no DNS name can be: %.100q (%v)", s.URL, err)
	}
	if _, err := fsm.Encode(fsm.Register{Spec: s, Owner: "n1"}); err != nil {
		t.Fatalf("an accepted spec does not encode: %v", err)
	}
}

// FuzzAdminRequest sends arbitrary admin requests (method, path after /workers or /mesh, query,
// Authorization, body) to a handler without raft over a pool holding one worker with an API key:
// nothing panics; every answer is a 2xx, or a 4xx or 503 with the error envelope and a code; and
// no answer shows the worker's key or the admin key.
func FuzzAdminRequest(f *testing.F) {
	for _, s := range []struct {
		method uint8
		path   string
		auth   string
		body   string
	}{
		{0, "/workers", "Bearer admin-fuzz-key", ""},
		{0, "/workers/w-000000000000?consistent=true", "Bearer admin-fuzz-key", ""},
		{0, "/workers/http%3A%2F%2F127.0.0.1%3A8001", "Bearer admin-fuzz-key", ""},
		{0, "/workers/http://user:pw@127.0.0.1:8001?key=x", "Bearer admin-fuzz-key", ""},
		{1, "/workers", "Bearer admin-fuzz-key", `{"url":"http://127.0.0.1:9"}`},
		{1, "/workers", "Bearer admin-fuzz-key", "{\"url\":\"http://127.0.0.1:9\",\"labels\":{\"k\":\"\xff\"}}"},
		{1, "/workers", "Bearer admin-fuzz-key", `{"url":"http://` + strings.Repeat("h", 10000) + `:9"}`},
		{2, "/workers/w-000000000000", "Bearer admin-fuzz-key", `{"disabled":true}`},
		{3, "/workers/w-000000000000", "Bearer admin-fuzz-key", `{"priority":3}`},
		{4, "/workers/w-000000000000", "Bearer wrong", ""},
		{0, "/mesh/peers?consistent=maybe", "", ""},
		{0, "/status", "", ""},
		{5, "/mesh/owners", "Bearer admin-fuzz-key", ""},
	} {
		f.Add(s.method, s.path, s.auth, []byte(s.body))
	}
	p := pool.New(pool.Config{})
	_, _, err := p.Upsert(worker.Spec{URL: "http://127.0.0.1:8001", APIKey: "sk-fuzz-secret", Models: []string{"m"}}, pool.OriginLocal)
	if err != nil {
		f.Fatal(err)
	}
	h := New(Config{Pool: p, NodeID: "n1", APIKey: "admin-fuzz-key", Status: func() any { return map[string]string{"node_id": "n1"} }, Logger: testkit.Quiet()})
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}
	f.Fuzz(func(t *testing.T, method uint8, path, auth string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/workers/" + path
		}
		a := do(h, req{method: methods[int(method)%len(methods)], uri: path, auth: auth, body: string(body)})
		if a.status == 0 {
			return // not an admin path
		}
		if strings.Contains(a.body, "sk-fuzz-secret") || strings.Contains(a.body, "admin-fuzz-key") {
			t.Fatalf("%s %q answered a secret: %s", methods[int(method)%len(methods)], path, a.body)
		}
		switch {
		case a.status >= 200 && a.status < 300:
		case a.status >= 400 && a.status < 500, a.status == 503:
			if a.errCode() == "" {
				t.Fatalf("%s %q: %d without an error code: %s", methods[int(method)%len(methods)], path, a.status, a.body)
			}
		default:
			t.Fatalf("%s %q: status %d: %s", methods[int(method)%len(methods)], path, a.status, a.body)
		}
	})
}
