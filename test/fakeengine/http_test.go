package fakeengine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is one engine served over HTTP on loopback, with a client of its own.
type harness struct {
	t      *testing.T
	e      *Engine
	url    string
	client *http.Client
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	if cfg.NodeName == "" {
		cfg.NodeName = "node-a"
	}
	e := New(cfg)
	url, err := e.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, e: e, url: url, client: newClient(t)}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return h
}

// newClient returns a client of its own whose idle connections close when the test ends.
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// do sends a request and returns the status and the whole body.
func (h *harness) do(method, path, gateway, body string) (int, []byte) {
	h.t.Helper()
	resp, err := h.send(context.Background(), method, path, gateway, body)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp.StatusCode, b
}

func (h *harness) send(ctx context.Context, method, path, gateway, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, h.url+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if gateway != "" {
		req.Header.Set(GatewayHeader, gateway)
	}
	return h.client.Do(req)
}

// fault posts a fault patch and fails the test unless it is accepted.
func (h *harness) fault(patch string) {
	h.t.Helper()
	if status, body := h.do("POST", "/_fault", "", patch); status != 200 {
		h.t.Fatalf("POST /_fault %s: %d %s", patch, status, body)
	}
}

// readEvents reads SSE payloads until [DONE] or an error, which it returns.
func readEvents(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	var events []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		payload, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			return events, errors.New("not an SSE data line: " + line)
		}
		if payload == "[DONE]" {
			return events, nil
		}
		events = append(events, payload)
	}
	if err := sc.Err(); err != nil {
		return events, err
	}
	return events, io.ErrUnexpectedEOF
}

// textOf extracts the answer text of a route's answer, or of one of its stream events.
func textOf(t *testing.T, route string, stream bool, payload []byte) string {
	t.Helper()
	var v struct {
		Text    string `json:"text"`
		Choices []struct {
			Text    string `json:"text"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(payload, &v); err != nil {
		t.Fatalf("answer of %s is not JSON: %v: %s", route, err, payload)
	}
	switch {
	case route == RouteGenerate:
		return v.Text
	case len(v.Choices) != 1:
		t.Fatalf("answer of %s has %d choices: %s", route, len(v.Choices), payload)
	case route == RouteCompletions:
		return v.Choices[0].Text
	case stream:
		return v.Choices[0].Delta.Content
	}
	return v.Choices[0].Message.Content
}

func TestModelRoutesAnswerCheckableText(t *testing.T) {
	h := newHarness(t, Config{})
	long := strings.Repeat("é", 30) + strings.Repeat("x", 30)
	tests := []struct {
		name, route, body, prompt string
	}{
		{"chat", RouteChat, `{"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"a"},{"role":"user","content":"hello \"there\""}]}`, `hello "there"`},
		{"chat parts", RouteChat, `{"messages":[{"role":"user","content":[{"type":"text","text":"look at "},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"this"}]}]}`, "look at this"},
		{"chat long", RouteChat, `{"messages":[{"role":"user","content":"` + long + `"}]}`, long[:30*2+10]},
		{"completions", RouteCompletions, `{"prompt":"once upon a time"}`, "once upon a time"},
		{"completions batch, one prompt", RouteCompletions, `{"prompt":["first","second"]}`, "first second"},
		{"generate", RouteGenerate, `{"text":"native prompt","sampling_params":{"max_new_tokens":8}}`, "native prompt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := "fake answer from node-a to: " + tt.prompt
			status, body := h.do("POST", tt.route, "", tt.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			if got := textOf(t, tt.route, false, body); got != want {
				t.Errorf("non-streamed text = %q, want %q", got, want)
			}
			streamBody := strings.Replace(tt.body, "{", `{"stream":true,`, 1)
			status, body = h.do("POST", tt.route, "", streamBody)
			if status != 200 {
				t.Fatalf("streamed status %d: %s", status, body)
			}
			events, err := readEvents(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			if len(events) != 20 {
				t.Errorf("stream has %d chunks, want 20", len(events))
			}
			var got string
			for _, ev := range events {
				if tt.route == RouteGenerate {
					got = textOf(t, tt.route, true, []byte(ev)) // SGLang streams the text so far
				} else {
					got += textOf(t, tt.route, true, []byte(ev))
				}
			}
			if got != want {
				t.Errorf("streamed text = %q, want %q", got, want)
			}
		})
	}
}

func TestEmbeddingsAreDeterministic(t *testing.T) {
	h := newHarness(t, Config{})
	type embeddings struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	get := func(body string) embeddings {
		status, b := h.do("POST", RouteEmbeddings, "", body)
		if status != 200 {
			t.Fatalf("status %d: %s", status, b)
		}
		var e embeddings
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	one, two := get(`{"input":"alpha"}`), get(`{"input":["alpha","beta"]}`)
	if len(one.Data) != 1 || len(two.Data) != 2 || len(one.Data[0].Embedding) != EmbeddingDim {
		t.Fatalf("shapes: %+v %+v", one, two)
	}
	if diff := cmp.Diff(one.Data[0].Embedding, two.Data[0].Embedding); diff != "" {
		t.Errorf("same input, other vector (-one +two):\n%s", diff)
	}
	if cmp.Equal(two.Data[0].Embedding, two.Data[1].Embedding) {
		t.Errorf("different inputs got the same vector")
	}
	if status, _ := h.do("POST", RouteEmbeddings, "", `{}`); status != 400 {
		t.Errorf("no input: status %d, want 400", status)
	}
}

func TestBadBodyIsOpenAIError(t *testing.T) {
	h := newHarness(t, Config{})
	status, body := h.do("POST", RouteChat, "", `{not json`)
	var env struct {
		Error struct {
			Message string `json:"message"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil || status != 400 || env.Error.Code != 400 || env.Error.Message == "" {
		t.Errorf("got %d %s (%v), want a 400 OpenAI error envelope", status, body, err)
	}
}

// A body that is JSON but not a request the route takes answers 400 with a one-line message
// that names the field, as vLLM refuses it, and never Go's types.
func TestMalformedRequestIs400NamingTheField(t *testing.T) {
	h := newHarness(t, Config{})
	tests := []struct {
		name, route, body, want string
	}{
		{"no messages", RouteChat, `{"model":"fake-model"}`, "messages: required"},
		{"null messages", RouteChat, `{"messages":null}`, "messages: required"},
		{"empty messages", RouteChat, `{"messages":[]}`, "messages: must not be empty"},
		{"messages a string", RouteChat, `{"messages":"hello"}`, "messages: must be an array"},
		{"a message not an object", RouteChat, `{"messages":[{"role":"user","content":"hi"},"hi"]}`, "messages[1]: must be an object"},
		{"a role not a string", RouteChat, `{"messages":[{"role":5,"content":"hi"}]}`, "messages[0].role: must be a string"},
		{"model not a string", RouteChat, `{"model":5,"messages":[{"role":"user","content":"hi"}]}`, "model: must be a string"},
		{"stream not a bool", RouteChat, `{"stream":"yes","messages":[{"role":"user","content":"hi"}]}`, "stream: must be true or false"},
		{"stream options not an object", RouteChat, `{"stream_options":[],"messages":[{"role":"user","content":"hi"}]}`, "stream_options: must be an object"},
		{"no input", RouteEmbeddings, `{}`, "input: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := h.do("POST", tt.route, "", tt.body)
			var env struct {
				Error struct {
					Message string `json:"message"`
					Code    int    `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &env); err != nil || status != 400 || env.Error.Code != 400 {
				t.Fatalf("got %d %s (%v), want a 400 OpenAI error envelope", status, body, err)
			}
			if env.Error.Message != tt.want {
				t.Errorf("message %q, want %q", env.Error.Message, tt.want)
			}
		})
	}
}

// With CheckModel, an OpenAI request naming a model the engine does not serve answers vLLM's
// 404; one naming its model, or none, is served, and so is /generate, which names none in
// SGLang. Without it any name is served.
func TestCheckModel(t *testing.T) {
	const notFound = `{"error":{"message":"The model ` + "`gpt-4o`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}}`
	checked := newHarness(t, Config{Model: "m1", CheckModel: true})
	open := newHarness(t, Config{Model: "m1"})
	tests := []struct {
		name       string
		h          *harness
		route      string
		body       string
		wantStatus int
	}{
		{"chat, another model", checked, RouteChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, 404},
		{"completion, another model", checked, RouteCompletions, `{"model":"gpt-4o","prompt":"hi"}`, 404},
		{"embeddings, another model", checked, RouteEmbeddings, `{"model":"gpt-4o","input":"hi"}`, 404},
		{"chat, its model", checked, RouteChat, `{"model":"m1","messages":[{"role":"user","content":"hi"}]}`, 200},
		{"chat, no model", checked, RouteChat, `{"messages":[{"role":"user","content":"hi"}]}`, 200},
		{"chat, null model", checked, RouteChat, `{"model":null,"messages":[{"role":"user","content":"hi"}]}`, 200},
		{"generate names no model", checked, RouteGenerate, `{"model":"gpt-4o","text":"hi"}`, 200},
		{"unchecked, another model", open, RouteChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := tt.h.do("POST", tt.route, "", tt.body)
			if status != tt.wantStatus {
				t.Fatalf("status %d %s, want %d", status, body, tt.wantStatus)
			}
			if status == 404 && string(body) != notFound {
				t.Errorf("body %s, want %s", body, notFound)
			}
		})
	}
}

func TestStreamIsFlushedChunkByChunk(t *testing.T) {
	h := newHarness(t, Config{})
	h.fault(`{"chunk_delay_ms": 600000}`) // ten minutes between chunks
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := h.send(ctx, "POST", RouteChat, "g1", `{"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if !strings.Contains(line, `"role":"assistant"`) {
			t.Errorf("first event %q is not the first chunk", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the first chunk did not arrive before the second was due: it was not flushed")
	}
	cancel() // the client goes away; the handler must end with it (goleak checks)
}

// BenchmarkChatCompletion measures the handler alone, as the upstream of proxy benchmarks.
func BenchmarkChatCompletion(b *testing.B) {
	h := New(Config{NodeName: "bench"}).Handler()
	body := `{"model":"fake-model","messages":[{"role":"user","content":"Hello, how are you today?"}]}`
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("POST", RouteChat, strings.NewReader(body))
		r.Header.Set(GatewayHeader, "gw")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
}
