package admin

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/worker"
)

// labelsJSON is a labels object of n labels k0..k(n-1).
func labelsJSON(n int) string {
	var b strings.Builder
	b.WriteString(`"labels":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":"v"`, i)
	}
	b.WriteByte('}')
	return b.String()
}

// modelsJSON is a models list of n models m0..m(n-1).
func modelsJSON(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf(`"m%d"`, i)
	}
	return `"models":[` + strings.Join(names, ",") + `]`
}

// TestSpecLimits: every string of a worker spec has a length limit, and labels, models and
// capabilities a count. POST, PUT (a full spec) and PATCH refuse a spec over one with 400
// invalid_field, the message naming the field and the limit, and write nothing; a spec at every
// limit is registered.
func TestSpecLimits(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.register(t, `{"url":"http://127.0.0.1:8001",`+labelsJSON(63)+`}`)
	one := "/workers/" + rec.ID
	s := strings.Repeat
	tests := []struct {
		name   string
		field  string // a JSON member (or several) of the body
		routes string // which of POST (P), PUT (U) and PATCH (A) take the field
		msg    string
	}{
		{"model of 100000 bytes", `"model":"` + s("m", 100000) + `"`, "PUA", "model: longer than 256 bytes"},
		{"model of 257 bytes", `"model":"` + s("m", 257) + `"`, "PUA", "model: longer than 256 bytes"},
		{"one of models", `"models":["a","` + s("m", 257) + `"]`, "PUA", "models[1]: longer than 256 bytes"},
		{"129 models", modelsJSON(129), "PUA", "models: more than 128"},
		{"20000 labels", labelsJSON(20000), "PUA", "labels: more than 64"},
		{"65 labels", labelsJSON(65), "PUA", "labels: more than 64"},
		{"a label key of 100000 bytes", `"labels":{"` + s("k", 100000) + `":"v"}`, "PUA", "labels: a key is longer than 317 bytes"},
		{"a label key of 318 bytes", `"labels":{"` + s("k", 318) + `":"v"}`, "PUA", "labels: a key is longer than 317 bytes"},
		{"a label value of 100000 bytes", `"labels":{"tier":"` + s("v", 100000) + `"}`, "PUA", "labels.tier: longer than 317 bytes"},
		{"a label value of 318 bytes", `"labels":{"tier":"` + s("v", 318) + `"}`, "PUA", "labels.tier: longer than 317 bytes"},
		{"region of 100000 bytes", `"region":"` + s("r", 100000) + `"`, "PU", "region: longer than 63 bytes"},
		{"region of 64 bytes", `"region":"` + s("r", 64) + `"`, "PU", "region: longer than 63 bytes"},
		{"owner of 100000 bytes", `"owner":"` + s("o", 100000) + `"`, "P", "owner: longer than 128 bytes"},
		{"owner of 129 bytes", `"owner":"` + s("o", 129) + `"`, "P", "owner: longer than 128 bytes"},
		{"api_key of 4097 bytes", `"api_key":"` + s("k", 4097) + `"`, "PUA", "api_key: longer than 4096 bytes"},
		{"llm_probe_model", `"health":{"llm_probe_model":"` + s("m", 257) + `"}`, "PUA", "health.llm_probe_model: longer than 256 bytes"},
		{"capabilities", `"capabilities":["chat","` + s("c", 33) + `"]`, "PUA", "capabilities[1]: longer than 32 bytes"},
		{"65 capabilities", `"capabilities":[` + strings.TrimSuffix(s(`"chat",`, 65), ",") + `]`, "PUA", "capabilities: more than 64"},
		{"connection_mode", `"connection_mode":"` + s("h", 100000) + `"`, "PU", "connection_mode: longer than 32 bytes"},
		{"provider", `"connection_mode":"external","provider":"` + s("p", 100000) + `"`, "PU", "provider: longer than 32 bytes"},
	}
	for _, tt := range tests {
		for _, r := range []struct {
			route, method, uri, body string
		}{
			{"P", "POST", "/workers", `{"url":"http://127.0.0.1:8002",` + tt.field + `}`},
			{"U", "PUT", one, `{"url":"http://127.0.0.1:8001",` + tt.field + `}`},
			{"A", "PATCH", one, `{` + tt.field + `}`},
		} {
			if !strings.Contains(tt.routes, r.route) {
				continue
			}
			t.Run(tt.name+"/"+r.method, func(t *testing.T) {
				a := do(e.h, req{method: r.method, uri: r.uri, body: r.body})
				if a.status != 400 || a.errCode() != codeInvalidField || !strings.Contains(a.body, `"message":"`+tt.msg) {
					t.Fatalf("%d %.300s; want 400 invalid_field %q", a.status, a.body, tt.msg)
				}
				if len(a.body) > 1000 {
					t.Errorf("the refusal echoes the value: %d bytes", len(a.body))
				}
			})
		}
	}
	t.Run("a URL of 2049 bytes", func(t *testing.T) {
		body := `{"url":"https://api.example.com/` + s("p", 2049-len("https://api.example.com/")) + `","connection_mode":"external"}`
		if a := do(e.h, req{method: "POST", uri: "/workers", body: body}); a.status != 400 || !strings.Contains(a.body, `"message":"url: longer than 2048 bytes`) {
			t.Fatalf("%d %.300s", a.status, a.body)
		}
	})
	t.Run("a 65th label by PATCH", func(t *testing.T) {
		a := do(e.h, req{method: "PATCH", uri: one, body: `{"labels":{"one-more":"v","two-more":"v"}}`})
		if a.status != 400 || !strings.Contains(a.body, "labels: more than 64") {
			t.Fatalf("%d %.300s", a.status, a.body)
		}
	})
	if _, ok := e.node.Worker(idOf(t, workerURL(8002))); ok {
		t.Error("a refused registration was written")
	}
	if cur, _ := e.node.Worker(worker.ID(rec.ID)); cur.Revision != rec.Revision {
		t.Errorf("a refused change was written: revision %d, was %d", cur.Revision, rec.Revision)
	}
	t.Run("at every limit", func(t *testing.T) {
		body := `{"url":"http://127.0.0.1:8003","model":"` + s("m", 256) + `",` + modelsJSON(127) +
			`,"labels":{"` + s("k", 317) + `":"` + s("v", 317) + `","a":"b"},"region":"` + s("r", 63) +
			`","api_key":"` + s("k", 4096) + `","health":{"llm_probe_model":"` + s("m", 256) + `"}}`
		if a := do(e.h, req{method: "POST", uri: "/workers", body: body}); a.status != 201 {
			t.Fatalf("%d %.300s", a.status, a.body)
		}
	})
}

// An owner has the node id's limit, which is the state folder's name's (storage.NodeDirName;
// cmd/meshgw takes --node-id as it is): 128 bytes.
func TestOwnerLimitIsTheNodeIDs(t *testing.T) {
	e := newEnv(t, nil)
	for _, n := range []int{128, 129} {
		id := strings.Repeat("n", n)
		_, err := storage.NodeDirName(id)
		a := do(e.h, req{method: "POST", uri: "/workers", body: `{"url":"http://127.0.0.1:8002","owner":"` + id + `"}`})
		if limit := a.errCode() == codeInvalidField; limit != (err != nil) {
			t.Errorf("an owner of %d bytes: %d %.200s; as a node id: %v", n, a.status, a.body, err)
		}
	}
}

// A record over the limits (written before them) is kept: its flags still change, by PUT and by
// a PATCH of flags only, while a change of its spec must bring it within them.
func TestRecordOverTheLimitsKeepsItsFlags(t *testing.T) {
	e := newEnv(t, nil)
	labels := map[string]string{}
	for i := range 70 {
		labels[fmt.Sprintf("k%d", i)] = "v"
	}
	spec := worker.Spec{URL: "http://127.0.0.1:8001", Labels: labels}
	if err := spec.Normalize(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.writer.Apply(t.Context(), fsm.Register{Spec: spec, Owner: "n1", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	one := "/workers/" + string(spec.ID())
	for _, tt := range []struct {
		method, body string
		status       int
	}{
		{"PUT", `{"disabled":true,"reason":"old record"}`, 200},
		{"PATCH", `{"disabled":false}`, 200},
		{"PATCH", `{"is_dead":true}`, 200},
		{"PATCH", `{"priority":7}`, 400},
		{"PATCH", `{"labels":null,"priority":7}`, 200},
	} {
		if a := do(e.h, req{method: tt.method, uri: one, body: tt.body}); a.status != tt.status {
			t.Errorf("%s %s: %d %.200s, want %d", tt.method, tt.body, a.status, a.body, tt.status)
		}
	}
}
