package gateway

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Every envelope the gateway writes has its row (status, type, code) in docs/errors.md.
func TestErrorEnvelopesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	envelopes := []struct {
		status int
		body   []byte
	}{
		{400, envelope(400, typeInvalidRequest, "x")},
		{404, bodyNotFound},
		{405, bodyMethod},
		{408, envelope(408, typeInvalidRequest, "x")},
		{413, bodyTooLarge(1)},
		{413, bodyStreamedRPC},
		{503, bodyOverloaded},
		{503, bodyBudgetFull},
		{503, envelopeCode(typeUnavailable, codeNoWorkers, "x")},
		{503, envelopeCode(typeUnavailable, codeUnavailable, "x")},
		{503, bodyLeft},
		{502, bodyUpstream},
		{504, bodyTimeout},
		{500, envelope(500, "internal_error", "x")},
	}
	for _, e := range envelopes {
		var env struct {
			Error struct {
				Type string `json:"type"`
				Code any    `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(e.body, &env); err != nil {
			t.Fatalf("%s: %v", e.body, err)
		}
		code := fmt.Sprint(env.Error.Code)
		if s, ok := env.Error.Code.(string); ok {
			code = `"` + s + `"`
		} else if code != fmt.Sprint(e.status) {
			t.Errorf("%s: numeric code %s differs from the status %d", e.body, code, e.status)
		}
		row := fmt.Sprintf("| %d | `%s` | `%s` |", e.status, env.Error.Type, code)
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/errors.md has no row %s", row)
		}
	}
	sse := strings.TrimSpace(strings.TrimPrefix(string(sseUpstreamError), "data: "))
	if !strings.Contains(string(doc), sse) {
		t.Errorf("docs/errors.md does not show the SSE error event %s", sse)
	}
}
