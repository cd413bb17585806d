package admin

import (
	"reflect"
	"testing"

	"github.com/meshgw/meshgw/consensus/fsm"
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
	} {
		f.Add([]byte(seed))
	}
	cur := worker.Spec{URL: "http://127.0.0.1:8001", APIKey: "sk", Labels: map[string]string{"a": "1"}, Health: &worker.Health{TimeoutSecs: ptr(3)}}
	if err := cur.Normalize(); err != nil {
		f.Fatal(err)
	}
	rec := fsm.Record{ID: cur.ID(), Spec: cur}
	f.Fuzz(func(t *testing.T, body []byte) {
		if s, _, e := parseRegistration(body, "eu"); checkRefusal(t, e) {
			checkAccepted(t, s)
		}
		if _, patch, e := parsePatch(body); checkRefusal(t, e) {
			if s, e := mergeSpec(cur, patch); checkRefusal(t, e) {
				checkAccepted(t, s)
			}
		}
		if _, spec, e := parsePut(body); checkRefusal(t, e) && spec != nil {
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
	if _, err := fsm.Encode(fsm.Register{Spec: s, Owner: "n1"}); err != nil {
		t.Fatalf("an accepted spec does not encode: %v", err)
	}
}
