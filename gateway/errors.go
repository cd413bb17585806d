package gateway

import (
	"encoding/json"
	"strconv"

	"github.com/valyala/fasthttp"
)

// Error types of the OpenAI envelope {"error":{"message","type","code"}}.
const (
	typeInvalidRequest = "invalid_request_error"
	typeOverloaded     = "overloaded_error"
	typeUnavailable    = "service_unavailable"
	codeNoWorkers      = "no_available_workers"
	codeUnavailable    = "service_unavailable" // the 503 code of a route of external providers (SMG)
	typeUpstream       = "upstream_error"
	typeTimeout        = "timeout_error"
	typeNotFound       = "not_found_error"
	typeMethod         = "method_not_allowed"
	typeTooLarge       = "payload_too_large"
	typeUnauthorized   = "authentication_error"
	typeForbidden      = "permission_error"
)

// envelope renders the OpenAI error body.
func envelope(code int, typ, msg string) []byte {
	b, _ := json.Marshal(struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}{Error: struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	}{msg, typ, code}})
	return b
}

// envelopeCode renders the OpenAI error body with a string code, as SMG answers 503
// {"type": "service_unavailable", "code": "no_available_workers"} (OpenAI's SDKs read it as
// err.code).
func envelopeCode(typ, code, msg string) []byte {
	b, _ := json.Marshal(map[string]map[string]string{"error": {"message": msg, "type": typ, "code": code}})
	return b
}

// Fixed answers are rendered once.
var (
	bodyOverloaded = envelope(503, typeOverloaded, "the gateway is at its in-flight request limit; retry shortly")
	bodyBudgetFull = envelope(503, typeOverloaded, "the gateway's buffer for request bodies (--max-buffered-body-mb) stayed full; retry shortly")
	// bodyStreamedRPC refuses a body larger than the budget for a gRPC or ZMQ worker, whose
	// transports take a body whole.
	bodyStreamedRPC = envelope(413, typeTooLarge, "request body is larger than the gateway's buffer for request bodies (--max-buffered-body-mb); such bodies are streamed, and only HTTP workers take a streamed body")
	bodyUpstream    = envelope(502, typeUpstream, "upstream request failed")
	bodyTimeout     = envelope(504, typeTimeout, "upstream request timed out")
	bodyNotFound    = envelope(404, typeNotFound, "unknown route")
	bodyMethod      = envelope(405, typeMethod, "method not allowed")
	// sseUpstreamError ends a stream whose upstream failed after the status was sent.
	sseUpstreamError = []byte(`data: {"error":{"message":"upstream stream failed before completion","type":"upstream_error","code":502}}` + "\n\n")
)

func bodyTooLarge(limit int64) []byte {
	return envelope(413, typeTooLarge, "request body is larger than the limit of "+strconv.FormatInt(limit, 10)+" bytes")
}

// writeError answers with status and a pre-rendered envelope body.
func writeError(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// writeJSON answers with status and v as JSON.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(ctx, 500, envelope(500, "internal_error", "cannot render the answer"))
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
