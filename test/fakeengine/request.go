package fakeengine

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
)

// requestBody is the part of a model request body the fake engine reads.
type requestBody struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages json.RawMessage `json:"messages"` // chat: read by parseMessages
	Prompt   json.RawMessage `json:"prompt"`   // completions
	Text     json.RawMessage `json:"text"`     // SGLang /generate
	Input    json.RawMessage `json:"input"`    // embeddings
}

// chatMessage is the part of a chat message the fake engine reads.
type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
}

// parsed is a model request the engine can answer.
type parsed struct {
	route    string
	stream   bool
	rb       requestBody
	messages []chatMessage // a chat's, never empty
	text     string        // the prompt as the engine sees it (routingText)
}

// parse reads a model request body, or returns the answer that refuses it, as vLLM would: 404
// for an unknown route, 400 with a one-line message naming the field for a body that is not a
// request of the route, and, with Config.CheckModel, 404 for a model the engine does not serve.
func (e *Engine) parse(route string, body []byte, stream bool) (parsed, *reply) {
	p := parsed{route: route}
	if err := json.Unmarshal(body, &p.rb); err != nil {
		return p, badRequest(bodyError("", err))
	}
	switch route {
	case RouteChat:
		msgs, msg := parseMessages(p.rb.Messages)
		if msg != "" {
			return p, badRequest(msg)
		}
		p.messages = msgs
	case RouteEmbeddings:
		if isAbsent(p.rb.Input) {
			return p, badRequest("input: required")
		}
	case RouteCompletions, RouteGenerate:
	default:
		r := errorReply(404, "invalid_request_error", "no model route "+strconv.Quote(route))
		return p, &r
	}
	if e.cfg.CheckModel && route != RouteGenerate && p.rb.Model != "" && p.rb.Model != e.cfg.Model {
		r := errorReply(404, "NotFoundError", "The model `"+p.rb.Model+"` does not exist.")
		return p, &r
	}
	p.stream = stream || p.rb.Stream
	p.text = routingText(&p)
	return p, nil
}

// parseMessages reads a chat's messages: a non-empty array of objects. A message that is
// refused is named by its index.
func parseMessages(raw json.RawMessage) ([]chatMessage, string) {
	switch {
	case isAbsent(raw):
		return nil, "messages: required"
	case raw[0] != '[':
		return nil, "messages: must be an array"
	}
	var msgs []chatMessage
	if json.Unmarshal(raw, &msgs) == nil {
		if len(msgs) == 0 {
			return nil, "messages: must not be empty"
		}
		return msgs, ""
	}
	// Find the message at fault, to name it.
	var items []json.RawMessage
	_ = json.Unmarshal(raw, &items)
	for i, item := range items {
		at := "messages[" + strconv.Itoa(i) + "]"
		if item[0] != '{' {
			return nil, at + ": must be an object"
		}
		var m chatMessage
		if err := json.Unmarshal(item, &m); err != nil {
			return nil, bodyError(at, err)
		}
	}
	return nil, "messages: must be an array of messages"
}

// isAbsent reports whether a field is missing or null.
func isAbsent(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// badRequest is a 400 answer with msg.
func badRequest(msg string) *reply {
	r := errorReply(400, "invalid_request_error", msg)
	return &r
}

// bodyError says in one line, without Go's types, why a JSON object at (the body when at is
// "") could not be read: the field whose value has the wrong type, and the type it takes.
func bodyError(at string, err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return "request body is not valid JSON: " + oneLine(err)
	}
	field := te.Field
	switch {
	case at != "" && field != "":
		field = at + "." + field
	case at != "":
		field = at
	case field == "":
		return "request body must be a JSON object"
	}
	return fmt.Sprintf("%s: must be %s", field, jsonKind(te.Type))
}

// jsonKind names the JSON value a Go type takes.
func jsonKind(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8,
		reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another type"
}
