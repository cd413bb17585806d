package admin

import (
	"strings"
	"testing"

	"github.com/meshgw/meshgw/gateway/weights"
	"github.com/meshgw/meshgw/worker"
)

// The write routes refuse a string that is not valid UTF-8 (raw bytes, or an escaped lone
// surrogate, which JSON decoding would quietly turn into U+FFFD) and a URL host no DNS name can
// be, with 400 naming the field, and write nothing.
func TestWriteRoutesRefuseInvalidUTF8AndOverlongHosts(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.register(t, `{"url":"http://127.0.0.1:8001","models":["m"]}`)
	h := e.handler(func(c *Config) { c.Weights = reportOnly(weights.Report{ID: "wu-1", Result: "ok"}) })
	one := "/workers/" + string(rec.ID)
	long := strings.Repeat("a", 10000)
	tests := []struct {
		name, method, uri, body string
		code, field             string
	}{
		{"register: url", "POST", "/workers", "{\"url\":\"http://127.0.0.1:8002\xff\"}", codeInvalidField, "url"},
		{"register: model", "POST", "/workers", "{\"url\":\"http://127.0.0.1:8002\",\"model\":\"m\xc3\"}", codeInvalidField, "model"},
		{"register: models", "POST", "/workers", "{\"url\":\"http://127.0.0.1:8002\",\"models\":[\"a\",\"\xff\"]}", codeInvalidField, "models"},
		{"register: label value", "POST", "/workers", "{\"url\":\"http://127.0.0.1:8002\",\"labels\":{\"k\":\"\xfe\"}}", codeInvalidField, "labels.k"},
		{"register: label key", "POST", "/workers", "{\"url\":\"http://127.0.0.1:8002\",\"labels\":{\"\xfe\":\"v\"}}", codeInvalidField, "labels"},
		{"register: region", "POST", "/workers", "{\"url\":\"http://127.0.0.1:8002\",\"region\":\"\xff\"}", codeInvalidField, "region"},
		{"register: api_key", "POST", "/workers", "{\"url\":\"http://127.0.0.1:8002\",\"api_key\":\"sk\xff\"}", codeInvalidField, "api_key"},
		{"register: owner", "POST", "/workers", "{\"url\":\"http://127.0.0.1:8002\",\"owner\":\"n\xff\"}", codeInvalidField, "owner"},
		{"register: nested", "POST", "/workers", "{\"url\":\"http://127.0.0.1:8002\",\"health\":{\"llm_probe_model\":\"\xff\"}}", codeInvalidField, "health.llm_probe_model"},
		{"register: lone surrogate", "POST", "/workers", `{"url":"http://127.0.0.1:8002","model":"a\ud800b"}`, codeInvalidField, "model"},
		{"register: unknown key", "POST", "/workers", "{\"url\":\"http://127.0.0.1:8002\",\"\xff\":1}", codeInvalidField, "a key"},
		{"register: host of 10000 characters", "POST", "/workers", `{"url":"http://` + long + `:8002"}`, codeInvalidField, "url"},
		{"register: host of 254 characters", "POST", "/workers", `{"url":"http://` + strings.Repeat("a.", 127) + `:8002"}`, codeInvalidField, "url"},
		{"replace spec: url", "PUT", one, `{"url":"http://` + long + `:8001"}`, codeInvalidField, "url"},
		{"replace spec: model", "PUT", one, "{\"url\":\"http://127.0.0.1:8001\",\"model\":\"\xff\"}", codeInvalidField, "model"},
		{"flags: reason", "PUT", one, "{\"disabled\":true,\"reason\":\"maint\xff\"}", codeInvalidField, "reason"},
		{"flags: escaped reason", "PUT", one, `{"disabled":true,"reason":"\udc00"}`, codeInvalidField, "reason"},
		{"patch: labels", "PATCH", one, "{\"labels\":{\"k\":\"\xff\"}}", codeInvalidField, "labels.k"},
		{"patch: reason", "PATCH", one, "{\"disabled\":true,\"reason\":\"\xff\"}", codeInvalidField, "reason"},
		{"weight update body", "POST", "/update_weights_from_disk", "{\"model_path\":\"/m\xff\"}", codeInvalidField, "model_path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := do(h, req{method: tt.method, uri: tt.uri, body: tt.body, from: loopback})
			if a.status != 400 || a.errCode() != tt.code || !strings.Contains(a.body, tt.field) {
				t.Fatalf("%d %.300s; want 400 %s naming %q", a.status, a.body, tt.code, tt.field)
			}
		})
	}
	if _, ok := e.node.Worker(idOf(t, workerURL(8002))); ok {
		t.Error("a refused registration was written")
	}
	cur, _ := e.node.Worker(worker.ID(rec.ID))
	if cur.Revision != rec.Revision || cur.Disabled {
		t.Errorf("a refused change was written: %+v", cur)
	}
}

// decodeObject and strictDecode, which every admin body goes through, name the field whose
// string is not valid UTF-8, however deep, and accept valid text with escapes.
func TestBodyDecodersNameTheFieldThatIsNotUTF8(t *testing.T) {
	tests := []struct{ body, field string }{
		{"{\"peer\":\"n\xff\"}", "peer"},
		{"{\"to\":\"\xc0\x80\"}", "to"},
		{`{"a":{"b":["x","\ud83d"]}}`, "a.b[1]"},
		{`{"a":"\ud83d\ude00","b":"\udc00\ud83d"}`, "b"},
		{`{"a":"\\ud800"}`, ""},
		{`{"a":"x\uD800"}`, "a"},
		{`{"a":"\ud83d\ude00 é \u00e9","b":[1,true,null]}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			_, e1 := decodeObject([]byte(tt.body))
			var v map[string]any
			e2 := strictDecode([]byte(tt.body), &v)
			for _, e := range []*apiError{e1, e2} {
				switch {
				case tt.field == "" && e != nil:
					t.Fatalf("refused valid text: %s", e.msg)
				case tt.field != "" && (e == nil || e.status != 400 || !strings.HasPrefix(e.msg, tt.field+": ")):
					t.Fatalf("%+v; want 400 naming %s", e, tt.field)
				}
			}
		})
	}
}
