package fakeengine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/test/testkit"
)

const chatBody = `{"messages":[{"role":"user","content":"hi"}]}`
const chatStreamBody = `{"stream":true,"messages":[{"role":"user","content":"hi"}]}`

func TestFaultPatchValidation(t *testing.T) {
	tests := []struct {
		name, body, wantErr string
	}{
		{"unknown field", `{"latency":5}`, `unknown field "latency"`},
		{"wrong type", `{"latency_ms":"5"}`, "latency_ms: want int, got string"},
		{"not an object", `[1]`, "body must be a JSON object"},
		{"not JSON", `{`, "body must be a JSON object"},
		{"two objects", `{"hang":true}{}`, "body must be a JSON object"},
		{"health status", `{"health_status":99}`, "health_status: 99 is not an HTTP status (100-599)"},
		{"error status", `{"error_status":600}`, "error_status: 600 is not an HTTP status (100-599, or 0 for none)"},
		{"error rate high", `{"error_rate":1.5}`, "error_rate: 1.5 is not within 0..1"},
		{"error rate low", `{"error_rate":-0.1}`, "error_rate: -0.1 is not within 0..1"},
		{"latency", `{"latency_ms":-1}`, "latency_ms: -1 is not within 0..3600000"},
		{"chunks", `{"stream_chunks":0}`, "stream_chunks: 0 is not within 1..100000"},
		{"chunk delay", `{"chunk_delay_ms":-5}`, "chunk_delay_ms: -5 is not within 0..3600000"},
		{"cut", `{"cut_stream_after":-1}`, "cut_stream_after: -1 is negative"},
		{"weight status", `{"weight_update_status":0}`, "weight_update_status: 0 is not an HTTP status (100-599)"},
	}
	h := newHarness(t, Config{})
	h.fault(`{"latency_ms": 1}`)
	before := h.e.Faults()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := h.do("POST", "/_fault", "", tt.body)
			var got struct{ Error string }
			if err := json.Unmarshal(body, &got); err != nil || status != 400 {
				t.Fatalf("got %d %s, want 400 with a JSON error", status, body)
			}
			if got.Error != tt.wantErr {
				t.Errorf("error %q, want %q", got.Error, tt.wantErr)
			}
			if strings.Count(string(body), "\n") != 1 {
				t.Errorf("answer %q is not one line", body)
			}
			if diff := cmp.Diff(before, h.e.Faults()); diff != "" {
				t.Errorf("a rejected patch changed the faults (-before +after):\n%s", diff)
			}
		})
	}
}

func TestFaultsAreStickyAndEmptyObjectResets(t *testing.T) {
	h := newHarness(t, Config{})
	h.fault(`{"latency_ms": 3, "stream_chunks": 4}`)
	h.fault(`{"error_status": 503, "error_rate": 0.25}`)
	want := DefaultFaults()
	want.LatencyMS, want.StreamChunks, want.ErrorStatus, want.ErrorRate = 3, 4, 503, 0.25
	status, body := h.do("GET", "/_fault", "", "")
	var got Faults
	if err := json.Unmarshal(body, &got); err != nil || status != 200 {
		t.Fatalf("GET /_fault: %d %s", status, body)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("faults after two patches (-want +got):\n%s", diff)
	}
	h.fault(`{}`)
	if diff := cmp.Diff(DefaultFaults(), h.e.Faults()); diff != "" {
		t.Errorf("{} did not reset (-want +got):\n%s", diff)
	}
}

func TestHealthStatusFault(t *testing.T) {
	h := newHarness(t, Config{})
	for _, code := range []int{200, 503, 204, 500} {
		h.fault(`{"health_status": ` + itoa(code) + `}`)
		if status, _ := h.do("GET", "/health", "", ""); status != code {
			t.Errorf("health_status %d: /health answered %d", code, status)
		}
	}
}

func TestErrorStatusAndRate(t *testing.T) {
	tests := []struct {
		name     string
		patch    string
		min, max int // failures out of 200 requests
	}{
		{"no fault", `{}`, 0, 0},
		{"every request", `{"error_status": 503}`, 200, 200},
		{"rate zero", `{"error_status": 500, "error_rate": 0}`, 0, 0},
		{"a quarter", `{"error_status": 429, "error_rate": 0.25}`, 25, 75},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{Seed: 7})
			h.fault(tt.patch)
			want := h.e.Faults().ErrorStatus
			failed := 0
			for range 200 {
				status, body := h.do("POST", RouteChat, "", chatBody)
				if status == 200 {
					continue
				}
				failed++
				var env struct{ Error struct{ Code int } }
				if status != want || json.Unmarshal(body, &env) != nil || env.Error.Code != want {
					t.Fatalf("failed request: %d %s, want %d in an OpenAI envelope", status, body, want)
				}
			}
			if failed < tt.min || failed > tt.max {
				t.Errorf("%d of 200 failed, want %d..%d", failed, tt.min, tt.max)
			}
		})
	}
}

func TestLatencyDelaysAnswers(t *testing.T) {
	h := newHarness(t, Config{})
	h.fault(`{"latency_ms": 50}`)
	start := time.Now()
	if status, _ := h.do("POST", RouteChat, "", chatBody); status != 200 {
		t.Fatalf("status %d", status)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("answered after %v, want at least 50ms", took)
	}
}

func TestHangUntilCleared(t *testing.T) {
	h := newHarness(t, Config{})
	h.fault(`{"hang": true}`)
	done := make(chan int, 1)
	go func() {
		resp, err := h.send(context.Background(), "POST", RouteChat, "", chatBody)
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	testkit.For(t, "the request to hang", func() bool { return h.e.hanging.Load() == 1 })
	select {
	case status := <-done:
		t.Fatalf("a hanging engine answered %d", status)
	default:
	}
	h.fault(`{"hang": false}`)
	if status := <-done; status != 200 {
		t.Errorf("after the hang cleared: %d, want 200", status)
	}
}

func TestHangEndsWhenClientGoesAway(t *testing.T) {
	h := newHarness(t, Config{})
	h.fault(`{"hang": true}`)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := h.send(ctx, "POST", RouteChat, "", chatBody)
		errc <- err
	}()
	testkit.For(t, "the request to arrive", func() bool { return h.e.Stats().Requests == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client error %v, want context.Canceled", err)
	}
	// The handler's goroutine must end too: goleak checks after the tests.
}

func TestCutStream(t *testing.T) {
	tests := []struct {
		name, patch string
		wantEvents  int
	}{
		{"after two chunks", `{"cut_stream_after": 2}`, 2},
		{"after the last chunk", `{"cut_stream_after": 5, "stream_chunks": 5}`, 5},
		{"beyond the chunks", `{"cut_stream_after": 50, "stream_chunks": 5}`, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			h.fault(tt.patch)
			resp, err := h.send(context.Background(), "POST", RouteChat, "", chatStreamBody)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			events, err := readEvents(resp.Body)
			if len(events) != tt.wantEvents {
				t.Errorf("got %d events before the cut, want %d", len(events), tt.wantEvents)
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("stream ended with %v, want io.ErrUnexpectedEOF", err)
			}
		})
	}
	t.Run("non-streamed body", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.fault(`{"cut_stream_after": 1}`)
		resp, err := h.send(context.Background(), "POST", RouteChat, "", chatBody)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("body ended with %v, want io.ErrUnexpectedEOF", err)
		}
	})
}

func TestStreamChunksAndDone(t *testing.T) {
	h := newHarness(t, Config{})
	h.fault(`{"stream_chunks": 3}`)
	resp, err := h.send(context.Background(), "POST", RouteCompletions, "", `{"stream":true,"prompt":"p"}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	// Three chunks, then [DONE], each followed by a blank line.
	if len(lines) != 8 || lines[6] != "data: [DONE]" || lines[1] != "" {
		t.Errorf("stream framing:\n%s", body)
	}
}

func TestStatsByGateway(t *testing.T) {
	h := newHarness(t, Config{})
	h.do("GET", "/health", "gw-1", "")
	h.do("GET", "/health", "gw-1", "")
	h.do("GET", "/health", "gw-2", "")
	h.do("GET", "/health", "", "")
	h.do("POST", RouteChat, "gw-2", chatBody)
	h.do("POST", RouteChat, "gw-2", chatStreamBody)
	h.do("POST", RouteEmbeddings, "", `{"input":"x"}`)
	h.do("GET", "/v1/models", "gw-1", "") // neither a probe nor a model request
	status, body := h.do("GET", "/_stats", "", "")
	want := `{"requests":3,"probes":4,"by_gateway":{"gw-1":{"requests":0,"probes":2},"gw-2":{"requests":2,"probes":1}},"weight_version":"default"}` + "\n"
	if status != 200 || string(body) != want {
		t.Errorf("GET /_stats = %d %s, want %s", status, body, want)
	}
}

func TestWeightUpdates(t *testing.T) {
	h := newHarness(t, Config{})
	version := func() string {
		_, b := h.do("GET", "/get_weight_version", "", "")
		var v struct {
			WeightVersion string `json:"weight_version"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v.WeightVersion
	}
	steps := []struct {
		name, patch, body string
		wantStatus        int
		wantSuccess       bool
		wantVersion       string
	}{
		{"model path", `{}`, `{"model_path":"/models/v2"}`, 200, true, "/models/v2"},
		{"explicit version", `{}`, `{"model_path":"/models/v3","weight_version":"v3"}`, 200, true, "v3"},
		{"injected failure", `{"weight_update_status":500}`, `{"model_path":"/models/v4"}`, 500, false, "v3"},
		{"no path", `{}`, `{}`, 400, false, "v3"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			h.fault(s.patch)
			status, body := h.do("POST", "/update_weights_from_disk", "", s.body)
			var res struct {
				Success bool   `json:"success"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(body, &res); err != nil || status != s.wantStatus || res.Success != s.wantSuccess || res.Message == "" {
				t.Errorf("got %d %s, want %d success=%v", status, body, s.wantStatus, s.wantSuccess)
			}
			if v := version(); v != s.wantVersion {
				t.Errorf("weight version %q, want %q", v, s.wantVersion)
			}
		})
	}
	t.Run("hang until cleared", func(t *testing.T) {
		h.fault(`{"weight_update_hang": true}`)
		done := make(chan int, 1)
		go func() {
			resp, err := h.send(context.Background(), "POST", "/update_weights_from_disk", "", `{"model_path":"v5"}`)
			if err != nil {
				done <- -1
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		testkit.For(t, "the update to hang", func() bool { return h.e.hanging.Load() == 1 })
		select {
		case status := <-done:
			t.Fatalf("a hanging update answered %d", status)
		default:
		}
		if v := version(); v != "v3" {
			t.Errorf("weight version %q while hanging, want v3", v)
		}
		h.fault(`{}`)
		if status := <-done; status != 200 {
			t.Errorf("after the hang cleared: %d", status)
		}
		if v := version(); v != "v5" {
			t.Errorf("weight version %q, want v5", v)
		}
	})
}

func TestSGLangInfoRoutes(t *testing.T) {
	h := newHarness(t, Config{Model: "m-1"})
	_, body := h.do("GET", "/v1/models", "", "")
	var models struct {
		Object string
		Data   []struct{ ID, Object string }
	}
	if err := json.Unmarshal(body, &models); err != nil || models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "m-1" {
		t.Errorf("GET /v1/models = %s", body)
	}
	_, body = h.do("GET", "/get_model_info", "", "")
	var info struct {
		ModelPath    string `json:"model_path"`
		IsGeneration bool   `json:"is_generation"`
	}
	if err := json.Unmarshal(body, &info); err != nil || info.ModelPath != "m-1" || !info.IsGeneration {
		t.Errorf("GET /get_model_info = %s", body)
	}
}

func TestCloseEndsHangingRequests(t *testing.T) {
	h := newHarness(t, Config{})
	h.fault(`{"hang": true}`)
	errc := make(chan error, 1)
	go func() {
		_, err := h.send(context.Background(), "POST", RouteChat, "", chatBody)
		errc <- err
	}()
	testkit.For(t, "the request to arrive", func() bool { return h.e.Stats().Requests == 1 })
	if err := h.e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err == nil {
		t.Error("a request hanging at Close got an answer")
	}
	if _, err := h.e.Start("127.0.0.1:0"); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// FuzzParseFaults feeds arbitrary POST /_fault bodies: nothing panics, a refusal is one line,
// an accepted body leaves valid knobs, and the knobs it leaves read back the same as JSON.
func FuzzParseFaults(f *testing.F) {
	for _, s := range []string{`{}`, `{"health_status":503}`, `{"error_status":500,"error_rate":0.5}`,
		`{"latency_ms":100,"stream_chunks":3,"chunk_delay_ms":10,"cut_stream_after":2}`, `{"hang":true}`,
		`{"weight_update_status":500,"weight_update_hang":false}`, `{"latency":5}`, `{"latency_ms":"5"}`, `[1]`, `{`,
		`{"hang":true}{}`, `{"error_rate":1e400}`, `{"stream_chunks":null}`, `null`, `{"health_status":-1}`} {
		f.Add([]byte(s))
	}
	cur := DefaultFaults()
	cur.LatencyMS, cur.Hang = 7, true
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := ParseFaults(cur, body)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n") || err.Error() == "" {
				t.Fatalf("refusal %q is not one line", err)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("accepted knobs are invalid: %v", err)
		}
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseFaults(DefaultFaults(), b)
		if err != nil || back != got {
			t.Fatalf("knobs %+v read back as %+v, %v", got, back, err)
		}
	})
}
