package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/worker"
)

// MaxBody bounds an admin request body; a larger one is answered 413 payload_too_large.
const MaxBody = 1 << 20

// drainLimit is how much of an oversized body is read and dropped before the 413 goes out.
// Closing a connection with unread bytes in its receive buffer makes the kernel send a reset,
// which can destroy the 413 before the client reads it; a client that sent a few MiB by mistake
// should see the 413, while one that sends far more is cut off.
const drainLimit = 16 << 20

// Field sets of the write bodies.
var (
	specFields  = jsonNames(reflect.TypeFor[worker.Spec]())
	flagFields  = []string{"disabled", "is_dead", "reason"}
	patchFields = []string{"priority", "cost", "labels", "api_key", "health", "resilience", "model", "models", "capabilities"}
)

// jsonNames lists the JSON names of t's fields.
func jsonNames(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// readBody returns the request body, refusing one over MaxBody before reading it when its
// Content-Length says so, and while reading it otherwise.
func readBody(ctx *fasthttp.RequestCtx) ([]byte, *apiError) {
	tooLarge := errorf(fasthttp.StatusRequestEntityTooLarge, codePayloadTooLarge, fmt.Sprintf("admin request bodies are limited to %d bytes", MaxBody))
	r := ctx.RequestBodyStream()
	if ctx.Request.Header.ContentLength() > MaxBody {
		drain(ctx, r)
		return nil, tooLarge
	}
	if r == nil {
		b := ctx.Request.Body()
		if len(b) > MaxBody {
			return nil, tooLarge
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxBody+1))
	if err != nil {
		return nil, errorf(fasthttp.StatusBadRequest, codeInvalidRequest, "the request body could not be read")
	}
	if len(b) > MaxBody {
		drain(ctx, r)
		return nil, tooLarge
	}
	return b, nil
}

// drain drops up to drainLimit more bytes of an oversized body, then marks the connection to
// close (what is left of the body, if anything, is still on the wire).
func drain(ctx *fasthttp.RequestCtx, r io.Reader) {
	if r != nil {
		_, _ = io.CopyN(io.Discard, r, drainLimit)
	}
	ctx.SetConnectionClose()
}

// object is a JSON object body, one raw value per key.
type object map[string]json.RawMessage

// decodeObject parses body as exactly one JSON object, every string of it valid UTF-8.
func decodeObject(body []byte) (object, *apiError) {
	if e := checkText(body); e != nil {
		return nil, e
	}
	var obj object
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(&obj); err != nil || obj == nil {
		return nil, errorf(400, codeInvalidRequest, "the body must be a JSON object"+jsonReason(err))
	}
	if d.More() {
		return nil, errorf(400, codeInvalidRequest, "the body must be one JSON object, with nothing after it")
	}
	return obj, nil
}

func jsonReason(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf(": invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return ", not " + te.Value
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ": the body is empty or cut short"
	}
	return ""
}

func (o object) has(key string) bool { _, ok := o[key]; return ok }

// keys returns o's keys, sorted so that error messages are stable.
func (o object) keys() []string {
	out := make([]string, 0, len(o))
	for k := range o {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// only refuses a key outside allowed: invalid_field when it is a spec field the route cannot
// change (why says why), unknown_field otherwise.
func (o object) only(allowed []string, why string) *apiError {
	for _, k := range o.keys() {
		if slices.Contains(allowed, k) {
			continue
		}
		if slices.Contains(specFields, k) || slices.Contains(flagFields, k) || k == "owner" {
			return errorf(400, codeInvalidField, k+": "+why)
		}
		return errorf(400, codeUnknownField, fmt.Sprintf("unknown field %q", k))
	}
	return nil
}

// without returns o without keys.
func (o object) without(keys ...string) object {
	out := make(object, len(o))
	for k, v := range o {
		if !slices.Contains(keys, k) {
			out[k] = v
		}
	}
	return out
}

// strictDecode decodes data into v, refusing unknown fields (nested ones too) and text that is
// not valid UTF-8, and naming the field of a type error or the unknown field by its JSON path.
func strictDecode(data []byte, v any) *apiError {
	if e := checkText(data); e != nil {
		return e
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	err := d.Decode(v)
	if err == nil {
		return nil
	}
	if e := locate(data, reflect.TypeOf(v)); e != nil {
		return e
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return errorf(400, codeInvalidField, fmt.Sprintf("%s: must be %s, not %s", te.Field, jsonType(te.Type), te.Value))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return errorf(400, codeUnknownField, "unknown field "+name)
	}
	return errorf(400, codeInvalidRequest, "the body does not decode"+jsonReason(err))
}

// jsonType names a Go type the way a JSON user thinks of it.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint64, reflect.Uint32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// flagBody is the flags part of a PUT or PATCH body.
type flagBody struct {
	Disabled *bool  `json:"disabled"`
	IsDead   *bool  `json:"is_dead"`
	Reason   string `json:"reason"`
}

func (f flagBody) any() bool { return f.Disabled != nil || f.IsDead != nil }

// decodeFlags reads disabled, is_dead and reason from o.
func decodeFlags(o object) (flagBody, *apiError) {
	var f flagBody
	sub := make(object)
	for _, k := range flagFields {
		if v, ok := o[k]; ok {
			sub[k] = v
		}
	}
	b, _ := json.Marshal(sub)
	if e := strictDecode(b, &f); e != nil {
		return f, e
	}
	if f.Reason != "" && (f.Disabled == nil || !*f.Disabled) {
		return f, errorf(400, codeInvalidField, `reason: describes a disable; send it with "disabled": true`)
	}
	if len(f.Reason) > 1024 {
		return f, errorf(400, codeInvalidField, "reason: longer than 1024 bytes")
	}
	return f, nil
}

// normalize validates s in place (the limits of its fields, then worker.Spec.Normalize, whose
// *FieldError names the field) and drops empty overrides, so that "labels": {} and no labels
// are the same spec.
func normalize(s *worker.Spec) *apiError {
	if e := checkLimits(s); e != nil {
		return e
	}
	if err := s.Normalize(); err != nil {
		var fe *worker.FieldError
		if errors.As(err, &fe) {
			return errorf(400, codeInvalidField, fe.Error())
		}
		return errorf(400, codeInvalidRequest, err.Error())
	}
	if len(s.Labels) == 0 {
		s.Labels = nil
	}
	if len(s.Models) == 0 {
		s.Models = nil
	}
	if len(s.Capabilities) == 0 {
		s.Capabilities = nil
	}
	if s.Health != nil && *s.Health == (worker.Health{}) {
		s.Health = nil
	}
	if r := s.Resilience; r != nil && len(r.CapacityStatusCodes) == 0 && len(r.RetryableStatusCodes) == 0 &&
		r.CBFailureThreshold == nil && r.CBSuccessThreshold == nil && r.CBTimeoutSecs == nil &&
		r.MaxRetries == nil && r.DisableRetry == nil {
		s.Resilience = nil
	}
	return nil
}
