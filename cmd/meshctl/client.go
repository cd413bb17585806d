package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// maxAnswer bounds how much of an answer meshctl reads.
const maxAnswer = 64 << 20

// client calls one gateway's admin API.
type client struct {
	base    string // the gateway's URL, without a trailing slash
	key     string // the admin key; sent as a bearer token, never printed
	timeout time.Duration
	http    *http.Client
}

// answer is one admin API answer.
type answer struct {
	Status int
	Body   []byte
}

// refusedError is a gateway's refusal: a status of 400 or more with its error body.
type refusedError struct {
	Status  int
	Code    string
	Message string
}

func (e *refusedError) Error() string {
	code := e.Code
	if code == "" {
		code = strings.ToLower(strings.ReplaceAll(http.StatusText(e.Status), " ", "_"))
	}
	return fmt.Sprintf("%d %s: %s", e.Status, code, e.Message)
}

func (*refusedError) fromGateway() {}

// unreachableError is a request that got no answer.
type unreachableError struct {
	Gateway string
	Err     error
	Timeout time.Duration // set when the time ran out
}

func (e *unreachableError) Error() string {
	if e.Timeout > 0 {
		return fmt.Sprintf("no answer from the gateway at %s within %v (--timeout)", e.Gateway, e.Timeout)
	}
	return fmt.Sprintf("cannot reach the gateway at %s: %v", e.Gateway, e.Err)
}

func (e *unreachableError) Unwrap() error { return e.Err }
func (*unreachableError) fromGateway()    {}

// badAnswerError is a 2xx answer that meshctl cannot read.
type badAnswerError struct {
	What string
	Err  error
}

func (e *badAnswerError) Error() string {
	return fmt.Sprintf("the gateway's answer to %s cannot be read: %v", e.What, e.Err)
}

func (*badAnswerError) fromGateway() {}

// do sends one request; body, when not nil, is sent as JSON. A status of 400 or more is
// returned as a *refusedError.
func (c *client) do(ctx context.Context, method, path string, body []byte) (answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %v", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{}, c.unreachable(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return answer{}, c.unreachable(err)
	}
	if resp.StatusCode >= 400 {
		return answer{}, refusal(resp.StatusCode, data)
	}
	return answer{Status: resp.StatusCode, Body: data}, nil
}

// unreachable names the gateway, without any user info in its URL, and drops the request URL
// that net/http puts in its errors.
func (c *client) unreachable(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return &unreachableError{Gateway: worker.RedactURL(c.base), Err: ue.Err, Timeout: c.timeout}
		}
		err = ue.Err
	}
	return &unreachableError{Gateway: worker.RedactURL(c.base), Err: err}
}

// refusal reads the gateway's error body: the admin API's {"error": {"message", "code"}}, or
// OpenAI's {"error": {"message", "type", "code"}} of the model routes, whose code may be a
// number (then the type names the error), or {"error": "message"}; or /readiness' {"status",
// "reason"}. Any other body is shown as it came, cut short.
func refusal(status int, body []byte) error {
	var env struct {
		Error  json.RawMessage `json:"error"`
		Status string          `json:"status"`
		Reason string          `json:"reason"`
	}
	if json.Unmarshal(body, &env) == nil && len(env.Error) == 0 && env.Status != "" && env.Reason != "" {
		return &refusedError{Status: status, Code: env.Status, Message: env.Reason}
	}
	if len(env.Error) > 0 {
		var e struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		}
		var msg string
		switch {
		case json.Unmarshal(env.Error, &msg) == nil && msg != "":
			return &refusedError{Status: status, Message: msg}
		case json.Unmarshal(env.Error, &e) == nil:
			var code string
			if json.Unmarshal(e.Code, &code) != nil || code == "" {
				code = e.Type // a number or null: the status again
			}
			if code != "" || e.Message != "" {
				return &refusedError{Status: status, Code: code, Message: e.Message}
			}
		}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = "(no error body)"
	}
	return &refusedError{Status: status, Message: msg}
}

// workerPath is the admin path of a worker named by its id or its URL. A URL is
// percent-encoded as one path segment, as the admin API takes it.
func workerPath(ref string) string {
	return "/workers/" + strings.ReplaceAll(url.QueryEscape(ref), "+", "%20")
}
