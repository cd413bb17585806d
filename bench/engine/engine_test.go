package engine

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// serve runs the engine on a loopback port until the test ends and returns its base URL.
func serve(t *testing.T, cfg Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.ShutdownWithContext(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-done
	})
	return "http://" + ln.Addr().String()
}

func TestHandler(t *testing.T) {
	base := serve(t, Config{Events: 3})
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		header     map[string]string
		wantStatus int
		wantType   string
		wantEvents int // data: lines before [DONE]; -1 for a non-streamed answer
		wantIn     string
	}{
		{name: "completion", method: "POST", path: "/v1/chat/completions", body: `{"model":"m"}`,
			wantStatus: 200, wantType: "application/json", wantEvents: -1, wantIn: CompletionMarker},
		{name: "stream default count", method: "POST", path: "/v1/chat/completions", body: `{"stream":true}`,
			wantStatus: 200, wantType: "text/event-stream", wantEvents: 3},
		{name: "stream with spaced flag", method: "POST", path: "/v1/chat/completions", body: `{"stream": true}`,
			wantStatus: 200, wantType: "text/event-stream", wantEvents: 3},
		{name: "stream count from header", method: "POST", path: "/v1/chat/completions", body: `{"stream":true}`,
			header: map[string]string{HeaderEvents: "7"}, wantStatus: 200, wantType: "text/event-stream", wantEvents: 7},
		{name: "out-of-bounds count ignored", method: "POST", path: "/v1/chat/completions", body: `{"stream":true}`,
			header: map[string]string{HeaderEvents: "99999999"}, wantStatus: 200, wantType: "text/event-stream", wantEvents: 3},
		{name: "health", method: "GET", path: "/health", wantStatus: 200, wantEvents: -1, wantIn: "ok"},
		{name: "unknown path", method: "GET", path: "/nope", wantStatus: 404, wantEvents: -1, wantIn: "not found"},
		{name: "GET on chat", method: "GET", path: "/v1/chat/completions", wantStatus: 405, wantEvents: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, base+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if tt.wantType != "" && resp.Header.Get("Content-Type") != tt.wantType {
				t.Errorf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), tt.wantType)
			}
			if tt.wantIn != "" && !strings.Contains(string(b), tt.wantIn) {
				t.Errorf("body %q lacks %q", b, tt.wantIn)
			}
			if tt.wantEvents >= 0 {
				events := strings.Count(string(b), "data: {")
				if events != tt.wantEvents || !strings.HasSuffix(string(b), DoneEvent+"\n\n") {
					t.Errorf("got %d events, ends %q; want %d events then [DONE]", events, b[max(0, len(b)-20):], tt.wantEvents)
				}
			}
		})
	}
}

func TestOverridesDelay(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  time.Duration
	}{
		{"absent keeps config", "", 5 * time.Millisecond},
		{"set", "100", 100 * time.Millisecond},
		{"capped", "99999999", maxEventDelay},
		{"negative ignored", "-3", 5 * time.Millisecond},
		{"garbage ignored", "x", 5 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := Config{Events: 2, EventDelay: 5 * time.Millisecond}
			h := fasthttpHeader(tt.value)
			if got := overrides(h, base).EventDelay; got != tt.want {
				t.Errorf("delay %v, want %v", got, tt.want)
			}
		})
	}
}

// fasthttpHeader returns a request header carrying delay as HeaderEventDelayMs ("" for none).
func fasthttpHeader(delay string) *fasthttp.RequestHeader {
	var h fasthttp.RequestHeader
	if delay != "" {
		h.Set(HeaderEventDelayMs, delay)
	}
	return &h
}
