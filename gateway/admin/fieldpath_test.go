package admin

import (
	"strings"
	"testing"

	"github.com/meshgw/meshgw/consensus/fsm"
)

// journalOf is a Journal of fixed records.
type journalOf []fsm.JournalRecord

func (j journalOf) Journal() []fsm.JournalRecord { return j }

// TestTypeErrorsNameTheJSONPath: a value of the wrong type, or a field the route does not know,
// however deep, is refused with a message that starts with the field's JSON path (a label's
// key, a list's index), never a Go type's name, on every route that takes a body.
func TestTypeErrorsNameTheJSONPath(t *testing.T) {
	e, _ := ownershipEnv(t)
	rec := e.register(t, `{"url":"http://127.0.0.1:8001"}`)
	one := "/workers/" + rec.ID
	tests := []struct {
		name, method, uri, body string
		code, msg               string
	}{
		{"register: url", "POST", "/workers", `{"url":5}`, codeInvalidField, "url: must be a string, not number"},
		{"register: priority", "POST", "/workers", `{"url":"http://127.0.0.1:1","priority":"5"}`, codeInvalidField, "priority: must be an integer, not string"},
		{"register: a fraction", "POST", "/workers", `{"url":"http://127.0.0.1:1","priority":1.5}`, codeInvalidField, "priority: must be an integer, not number 1.5"},
		{"register: out of range", "POST", "/workers", `{"url":"http://127.0.0.1:1","dp_rank":1e400}`, codeInvalidField, "dp_rank: must be an integer, not number 1e400"},
		{"register: owner", "POST", "/workers", `{"url":"http://127.0.0.1:1","owner":true}`, codeInvalidField, "owner: must be a string, not bool"},
		{"register: nested unknown field", "POST", "/workers", `{"url":"http://127.0.0.1:1","health":{"foo":1}}`, codeUnknownField, `unknown field "health.foo"`},
		{"register: nested type", "POST", "/workers", `{"url":"http://127.0.0.1:1","health":{"timeout_secs":"3"}}`, codeInvalidField, "health.timeout_secs: must be an integer, not string"},
		{"register: a label", "POST", "/workers", `{"url":"http://127.0.0.1:1","labels":{"a":1}}`, codeInvalidField, "labels.a: must be a string, not number"},
		{"register: labels", "POST", "/workers", `{"url":"http://127.0.0.1:1","labels":["a"]}`, codeInvalidField, "labels: must be an object, not array"},
		{"register: one of models", "POST", "/workers", `{"url":"http://127.0.0.1:1","models":["a",2]}`, codeInvalidField, "models[1]: must be a string, not number"},
		{"register: a status code", "POST", "/workers", `{"url":"http://127.0.0.1:1","resilience":{"capacity_status_codes":[429,"x"]}}`, codeInvalidField, "resilience.capacity_status_codes[1]: must be an integer, not string"},
		{"replace: a label", "PUT", one, `{"url":"http://127.0.0.1:8001","labels":{"a":1}}`, codeInvalidField, "labels.a: must be a string, not number"},
		{"replace: nested unknown field", "PUT", one, `{"url":"http://127.0.0.1:8001","resilience":{"foo":1}}`, codeUnknownField, `unknown field "resilience.foo"`},
		{"replace: url", "PUT", one, `{"url":5}`, codeInvalidField, "url: must be a string, not number"},
		{"flags: disabled", "PUT", one, `{"disabled":"yes"}`, codeInvalidField, "disabled: must be a boolean, not string"},
		{"patch: a label", "PATCH", one, `{"labels":{"a":1}}`, codeInvalidField, "labels.a: must be a string, not number"},
		{"patch: nested unknown field", "PATCH", one, `{"health":{"foo":1}}`, codeUnknownField, `unknown field "health.foo"`},
		{"patch: priority", "PATCH", one, `{"priority":"5"}`, codeInvalidField, "priority: must be an integer, not string"},
		{"transfer: to", "POST", one + "/transfer", `{"to":5}`, codeInvalidField, "to: must be a string, not number"},
		{"rebalance: dry_run", "POST", "/mesh/rebalance", `{"dry_run":"yes"}`, codeInvalidField, "dry_run: must be a boolean, not string"},
		{"resolve: id", "POST", "/weight_update_journal/resolve", `{"acknowledge":true,"id":5}`, codeInvalidField, "id: must be a string, not number"},
	}
	journal := e.handler(func(c *Config) { c.Journal = journalOf{} })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := e.h
			if strings.HasPrefix(tt.uri, "/weight_update_journal") {
				h = journal
			}
			a := do(h, req{method: tt.method, uri: tt.uri, body: tt.body})
			if a.status != 400 || a.errCode() != tt.code || !strings.HasPrefix(a.message(), tt.msg) {
				t.Fatalf("%d %s; want 400 %s %q", a.status, a.body, tt.code, tt.msg)
			}
		})
	}
}
