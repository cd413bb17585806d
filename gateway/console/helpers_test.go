package console

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/test/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.Housekeeping()...) }

// fakeSource is a State the test changes.
type fakeSource struct {
	mu sync.Mutex
	st State
}

func (f *fakeSource) State() State {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.st
	s.Peers = append([]Peer(nil), f.st.Peers...)
	s.Workers = append([]Worker(nil), f.st.Workers...)
	return s
}

func (f *fakeSource) update(fn func(*State)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.st)
}

// keyAuth is the admin auth with one key.
type keyAuth string

func (k keyAuth) Authorize(ctx *fasthttp.RequestCtx) bool {
	if string(ctx.Request.Header.Peek("Authorization")) == "Bearer "+string(k) {
		return true
	}
	ctx.Error(`{"error":{"message":"missing or wrong admin bearer key"}}`, fasthttp.StatusUnauthorized)
	return false
}

// serve runs h on a loopback listener until the test ends and returns its base URL.
func serve(t testing.TB, h *Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if !h.Serve(ctx) {
			ctx.Error("not the console", fasthttp.StatusNotFound)
		}
	}, CloseOnShutdown: true}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Shutdown()
		<-done
	})
	return "http://" + ln.Addr().String()
}

func get(t *testing.T, url, key string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// sseReader reads server-sent events, each bounded by a deadline.
type sseReader struct {
	t    *testing.T
	resp *http.Response
	ch   chan [2]string
}

func openEvents(t *testing.T, base, key string) *sseReader {
	return openEventsAt(t, base+"/ui/api/events", key)
}

func openEventsAt(t *testing.T, url, key string) *sseReader {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r := &sseReader{t: t, resp: resp, ch: make(chan [2]string, 64)}
	go func() {
		defer close(r.ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ": up to date"):
				r.ch <- [2]string{"comment", line}
			case strings.HasPrefix(line, "event: "):
				name = line[7:]
			case strings.HasPrefix(line, "data: "):
				r.ch <- [2]string{name, line[6:]}
			}
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return r
}

// next returns the next event, failing the test when none comes within d; ok is false when the
// stream ended.
func (r *sseReader) next(d time.Duration) (name, data string, ok bool) {
	r.t.Helper()
	select {
	case ev, ok := <-r.ch:
		return ev[0], ev[1], ok
	case <-time.After(d):
		r.t.Fatalf("no event within %v", d)
		return "", "", false
	}
}
