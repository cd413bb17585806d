package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/testkit"
)

// sseUpstream serves n events, each only after the test allows it on next, and, when cutAfter >
// 0, kills the connection after that many events.
func sseUpstream(n, cutAfter int, next <-chan struct{}, hits *atomic.Int32) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		rw.WriteHeader(200)
		fl := rw.(http.Flusher)
		fl.Flush() // headers first, so the client sees the answer before any event
		for i := 1; i <= n; i++ {
			if next != nil {
				select {
				case <-next:
				case <-r.Context().Done():
					return
				}
			}
			_, _ = io.WriteString(rw, "data: {\"i\":"+string(rune('0'+i))+"}\n\n")
			fl.Flush()
			if i == cutAfter {
				conn, _, err := http.NewResponseController(rw).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
		}
		_, _ = io.WriteString(rw, "data: [DONE]\n\n")
	}
}

// readEvent reads one SSE event (up to the blank line).
func readEvent(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String()
		}
		if line == "\n" {
			return b.String()
		}
	}
}

func TestSSEEventsArriveOneByOne(t *testing.T) {
	e := newEnv(t, Config{})
	next := make(chan struct{})
	var hits atomic.Int32
	e.upstream(sseUpstream(3, 0, next, &hits))
	req, _ := http.NewRequest("POST", e.base+"/v1/chat/completions", strings.NewReader(`{"stream":true,"messages":[]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-Mesh-Worker") == "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	for i := 1; i <= 3; i++ {
		next <- struct{}{} // the upstream writes event i only now
		want := "data: {\"i\":" + string(rune('0'+i)) + "}\n\n"
		// The client must read event i before the upstream is allowed to send event i+1.
		if got := readEvent(t, br); got != want {
			t.Fatalf("event %d: got %q, want %q", i, got, want)
		}
	}
	if got := readEvent(t, br); got != "data: [DONE]\n\n" {
		t.Fatalf("last event %q", got)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("stream did not end cleanly: %v", err)
	}
}

func TestSSEUpstreamCutEndsWithErrorEventAndNoRetry(t *testing.T) {
	e := newEnv(t, Config{})
	var hits atomic.Int32
	_, w := e.upstream(sseUpstream(5, 2, nil, &hits))
	var other atomic.Int32
	e.upstream(sseUpstream(5, 0, nil, &other))
	// Force the first pick onto the cutting worker: disable the other one.
	for _, x := range e.gw.Pool().Snapshot().All {
		if x != w {
			if _, err := e.gw.Pool().SetFlags(x.ID, true, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	status, _, body := e.post("/v1/chat/completions", `{"stream":true}`)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	want := "data: {\"i\":1}\n\ndata: {\"i\":2}\n\n" + string(sseUpstreamError)
	if body != want {
		t.Errorf("body\n%q\nwant\n%q", body, want)
	}
	if !strings.Contains(body, `"type":"upstream_error","code":502`) {
		t.Error("error event lacks code 502")
	}
	if hits.Load() != 1 || other.Load() != 0 {
		t.Errorf("upstream hits %d/%d: a started stream must never be retried", hits.Load(), other.Load())
	}
	testkit.For(t, "the stream's outcome", func() bool { return len(e.outcomesCopy()) == 1 })
	if o := e.outcomesCopy()[0]; o.worker != w.ID || !o.connErr {
		t.Errorf("outcome %+v, want a connection failure of the cut worker", o)
	}
}

func TestStreamRequestWithJSONErrorAnswer(t *testing.T) {
	e := newEnv(t, Config{Retry: RetryConfig{Disabled: true}})
	e.upstream(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(400)
		_, _ = io.WriteString(rw, `{"error":"bad"}`)
	})
	status, _, body := e.post("/v1/chat/completions", `{"stream":true}`)
	if status != 400 || body != `{"error":"bad"}` {
		t.Errorf("got %d %q", status, body)
	}
}

func TestStreamRetriedBeforeFirstByte(t *testing.T) {
	e := newEnv(t, Config{})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	e.add(workerSpec(dead))
	var hits atomic.Int32
	e.upstream(sseUpstream(2, 0, nil, &hits))
	for i := 0; i < 4; i++ {
		status, _, body := e.post("/v1/chat/completions", `{"stream":true}`)
		if status != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") {
			t.Fatalf("request %d: %d %q", i, status, body)
		}
	}
}

func TestClientGoneMidStreamReleasesEverything(t *testing.T) {
	// The burst after the client left may be gathered into one write, which succeeds: the
	// client watch, not a failed write, may be what notices; it starts at once here.
	e := newEnv(t, Config{clientWatchAfter: time.Nanosecond})
	next := make(chan struct{})
	upstreamGone := make(chan struct{})
	_, w := e.upstream(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/event-stream")
		fl := rw.(http.Flusher)
		_, _ = io.WriteString(rw, "data: 1\n\n")
		fl.Flush()
		<-next
		// Keep sending until the gateway drops the connection.
		for i := 0; i < 1000; i++ {
			if _, err := io.WriteString(rw, "data: more\n\n"); err != nil {
				break
			}
			fl.Flush()
			select {
			case <-r.Context().Done():
				close(upstreamGone)
				return
			default:
			}
		}
		<-r.Context().Done()
		close(upstreamGone)
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"stream":true}`
	_, _ = io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, "data: 1") {
			break
		}
	}
	conn.Close() // the client goes away mid-stream
	close(next)
	<-upstreamGone // the gateway closed the upstream connection too
	testkit.For(t, "the call to finish", func() bool { return e.gw.adm.inflight.Load() == 0 && w.Inflight() == 0 && len(e.outcomesCopy()) == 1 })
}

// TestConcurrentStreamsEachGetTheirOwnEvents runs many streams at once through two workers:
// each client must get exactly its own events, in order, whole, so no pooled call, relay or
// buffer is ever shared by two live streams.
func TestConcurrentStreamsEachGetTheirOwnEvents(t *testing.T) {
	const clients, perClient, events = 24, 15, 20
	e := newEnv(t, Config{})
	upstream := func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		id := strings.TrimSuffix(strings.TrimPrefix(string(b), `{"stream":true,"id":"`), `"}`)
		rw.Header().Set("Content-Type", "text/event-stream")
		fl := rw.(http.Flusher)
		for i := range events {
			_, _ = io.WriteString(rw, streamEvent(id, i))
			fl.Flush()
		}
		_, _ = io.WriteString(rw, "data: [DONE]\n\n")
	}
	e.upstream(upstream)
	e.upstream(upstream)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer client.CloseIdleConnections()
	errs := make(chan error, clients)
	for c := range clients {
		go func() {
			for n := range perClient {
				id := strconv.Itoa(c) + "-" + strconv.Itoa(n)
				errs <- oneStream(client, e.base, id, events)
			}
		}()
	}
	for range clients * perClient {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	testkit.For(t, "every stream to finish", func() bool {
		idle := e.gw.adm.inflight.Load() == 0
		for _, w := range e.gw.Pool().Snapshot().All {
			idle = idle && w.Inflight() == 0
		}
		return idle
	})
}

// streamEvent is event i of stream id, of a length that varies with both.
func streamEvent(id string, i int) string {
	return `data: {"id":"` + id + `","i":` + strconv.Itoa(i) + `,"pad":"` + strings.Repeat("x", (len(id)*7+i*13)%97) + "\"}\n\n"
}

// oneStream posts stream id and checks that the answer is exactly its events and [DONE].
func oneStream(client *http.Client, base, id string, events int) error {
	resp, err := client.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true,"id":"`+id+`"}`))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("stream %s: %v", id, err)
	}
	var want strings.Builder
	for i := range events {
		want.WriteString(streamEvent(id, i))
	}
	want.WriteString("data: [DONE]\n\n")
	if resp.StatusCode != 200 || string(got) != want.String() {
		return fmt.Errorf("stream %s: status %d, got %d bytes %.120q..., want %d bytes of its own events", id, resp.StatusCode, len(got), got, want.Len())
	}
	return nil
}

// TestStreamStalledPastTheAttemptTimeoutEndsWithErrorEvent: the per-attempt timeout still bounds
// a stream whose upstream stops sending; the client gets the error event and the slot is freed.
func TestStreamStalledPastTheAttemptTimeoutEndsWithErrorEvent(t *testing.T) {
	e := newEnv(t, Config{RequestTimeout: 300 * time.Millisecond})
	release := make(chan struct{})
	defer close(release)
	_, w := e.upstream(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(rw, "data: 1\n\n")
		rw.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	status, _, body := e.post("/v1/chat/completions", `{"stream":true}`)
	if want := "data: 1\n\n" + string(sseUpstreamError); status != 200 || body != want {
		t.Fatalf("got %d %q, want 200 %q", status, body, want)
	}
	testkit.For(t, "the call to finish", func() bool {
		return e.gw.adm.inflight.Load() == 0 && w.Inflight() == 0 && len(e.outcomesCopy()) == 1
	})
	if o := e.outcomesCopy()[0]; !o.connErr {
		t.Errorf("outcome %+v, want a connection failure", o)
	}
}
