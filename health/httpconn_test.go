package health

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// okAnswer is a small keep-alive answer.
const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 15\r\nContent-Type: application/json\r\n\r\n{\"status\":\"ok\"}"

// rawEngine is a loopback engine whose answers a test writes byte for byte.
type rawEngine struct {
	URL      string
	accepted atomic.Int32 // connections accepted
}

// startRawEngine serves each accepted connection with serve until it returns or the test ends;
// the connection is then closed.
func startRawEngine(tb testing.TB, serve func(c net.Conn, br *bufio.Reader)) *rawEngine {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	e := &rawEngine{URL: "http://" + ln.Addr().String()}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[net.Conn]bool{}
		closed bool
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			mu.Lock()
			if closed {
				c.Close()
			}
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			})
		}
	})
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return e
}

// readRequest reads one request head and returns it.
func readRequest(br *bufio.Reader) (string, error) {
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		head.WriteString(line)
		if line == "\r\n" {
			return head.String(), nil
		}
	}
}

// skipRequest reads one request head without keeping it (the benchmark's engine allocates
// nothing).
func skipRequest(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if string(line) == "\r\n" {
			return nil
		}
	}
}

// answerEach answers every request on a connection with answer.
func answerEach(answer string) func(net.Conn, *bufio.Reader) {
	return func(c net.Conn, br *bufio.Reader) {
		for {
			if err := skipRequest(br); err != nil {
				return
			}
			c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	}
}

// privateProber returns a prober on its own pool, emptied when the test ends.
func privateProber(t *testing.T) *HTTPProber {
	p := &HTTPProber{pool: newEnginePool(nil)}
	t.Cleanup(p.pool.closeIdle)
	return p
}

func addrOf(t *testing.T, url string) engineAddr {
	t.Helper()
	u, ok := parseEngineURL(url)
	if !ok {
		t.Fatalf("parseEngineURL(%q) failed", url)
	}
	return u.key
}

func TestHTTPProberRequest(t *testing.T) {
	heads := make(chan string, 1)
	e := startRawEngine(t, func(c net.Conn, br *bufio.Reader) {
		head, err := readRequest(br)
		if err != nil {
			return
		}
		heads <- head
		io.WriteString(c, okAnswer)
	})
	tg := httpTarget(e.URL)
	tg.APIKey = "sk-raw-key"
	if err := privateProber(t).Probe(context.Background(), tg); err != nil {
		t.Fatal(err)
	}
	head := <-heads
	host := strings.TrimPrefix(e.URL, "http://")
	for _, line := range []string{"GET /health HTTP/1.1\r\n", "Host: " + host + "\r\n",
		"Authorization: Bearer sk-raw-key\r\n", "X-Mesh-Gateway: gw-1\r\n"} {
		if !strings.Contains(head, line) {
			t.Errorf("request lacks %q:\n%s", line, head)
		}
	}
}

func TestHTTPProberReusesConnection(t *testing.T) {
	e := startRawEngine(t, answerEach(okAnswer))
	p := privateProber(t)
	for range 5 {
		if err := p.Probe(context.Background(), httpTarget(e.URL)); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.accepted.Load(); n != 1 {
		t.Errorf("5 probes opened %d connections, want 1", n)
	}
	if all, _ := p.pool.idleCount(addrOf(t, e.URL)); all != 1 {
		t.Errorf("%d idle connections, want 1", all)
	}
}

// TestHTTPProberIdlePerHost runs 4 probes of one engine at once: 4 connections, of which the
// pool keeps 2.
func TestHTTPProberIdlePerHost(t *testing.T) {
	const probes = 4
	arrived := make(chan struct{}, probes)
	release := make(chan struct{})
	e := startRawEngine(t, func(c net.Conn, br *bufio.Reader) {
		for {
			if _, err := readRequest(br); err != nil {
				return
			}
			arrived <- struct{}{}
			<-release
			io.WriteString(c, okAnswer)
		}
	})
	p := privateProber(t)
	errs := make(chan error, probes)
	for range probes {
		go func() { errs <- p.Probe(context.Background(), httpTarget(e.URL)) }()
	}
	for range probes {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			close(release)
			t.Fatal("probes did not reach the engine")
		}
	}
	close(release)
	for range probes {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if all, to := p.pool.idleCount(addrOf(t, e.URL)); all != 2 || to != 2 {
		t.Errorf("idle connections: %d in all, %d to the engine; want 2 and 2", all, to)
	}
}

// TestHTTPProberStaleConnection: an engine that closes its idle connections (uvicorn does after
// 5 s) costs the next probe a new connection, not a failure.
func TestHTTPProberStaleConnection(t *testing.T) {
	e := startRawEngine(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err == nil {
			io.WriteString(c, okAnswer)
		}
	})
	p := privateProber(t)
	for i := range 3 {
		if err := p.Probe(context.Background(), httpTarget(e.URL)); err != nil {
			t.Fatalf("probe %d: %v", i, err)
		}
	}
	if n := e.accepted.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
}

func TestHTTPProberLargeAnswers(t *testing.T) {
	chunk := strings.Repeat("x", 32<<10)
	chunked := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strings.Repeat("8000\r\n"+chunk+"\r\n", 32) + "0\r\n\r\n"
	tests := []struct {
		name   string
		answer string
		code   int // 0: healthy
		reused bool
	}{
		{"small", okAnswer, 0, true},
		{"large body by length", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1048576\r\n\r\n" +
			strings.Repeat("x", 1<<20), 503, false},
		{"large chunked body", chunked, 0, false},
		{"body up to close", "HTTP/1.1 200 OK\r\n\r\nbye", 0, false},
		{"large head", "HTTP/1.1 503 Service Unavailable\r\nX-Big: " + strings.Repeat("a", 100<<10) +
			"\r\nContent-Length: 2\r\n\r\nno", 503, false},
		{"interim answer", "HTTP/1.1 100 Continue\r\n\r\n" + okAnswer, 0, true},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", 0, true},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", 0, false},
		{"HTTP/1.0 without keep-alive", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := startRawEngine(t, answerEach(tc.answer))
			p := privateProber(t)
			for range 2 {
				err := p.Probe(context.Background(), httpTarget(e.URL))
				var pe *ProbeError
				switch {
				case tc.code == 0 && err != nil:
					t.Fatalf("Probe() = %v, want healthy", err)
				case tc.code != 0 && (!errors.As(err, &pe) || pe.StatusCode != tc.code):
					t.Fatalf("Probe() = %v, want status %d", err, tc.code)
				}
			}
			want := int32(2)
			if tc.reused {
				want = 1
			}
			if n := e.accepted.Load(); n != want {
				t.Errorf("2 probes opened %d connections, want %d", n, want)
			}
		})
	}
}

func TestHTTPProberMalformedAnswer(t *testing.T) {
	e := startRawEngine(t, answerEach("SECRET-ECHO garbage\r\n\r\n"))
	err := privateProber(t).Probe(context.Background(), httpTarget(e.URL))
	var pe *ProbeError
	if !errors.As(err, &pe) || pe.Reason != "connection error: malformed answer" {
		t.Fatalf("Probe() = %v, want a malformed answer", err)
	}
}

// hungEngine reads requests and never answers; got receives one value per request.
func hungEngine(t *testing.T, got chan<- struct{}) *rawEngine {
	return startRawEngine(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err != nil {
			return
		}
		got <- struct{}{}
		io.Copy(io.Discard, br) // until the prober (or the test's end) closes the connection
	})
}

func TestHTTPProberCancel(t *testing.T) {
	got := make(chan struct{}, 1)
	e := hungEngine(t, got)
	p := privateProber(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Probe(ctx, httpTarget(e.URL)) }()
	<-got
	start := time.Now()
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Probe did not return within 10 s of its context's cancellation")
	}
	var pe *ProbeError
	if !errors.As(err, &pe) || pe.Reason != "canceled" || !errors.Is(err, context.Canceled) {
		t.Errorf("Probe() = %v, want canceled", err)
	}
	if all, _ := p.pool.idleCount(addrOf(t, e.URL)); all != 0 {
		t.Errorf("the canceled probe's connection was pooled")
	}
	t.Logf("returned %v after cancel", time.Since(start))
}

// TestCheckerCloseAbortsHTTPProbe: Close ends a probe of a hung engine at once, not after the
// worker's 60 s timeout, and closes its connection.
func TestCheckerCloseAbortsHTTPProbe(t *testing.T) {
	got := make(chan struct{}, 1)
	e := hungEngine(t, got)
	c := newChecker(t, DefaultConfig(), privateProber(t), nil)
	if err := c.Add(worker.Spec{URL: e.URL, Health: &worker.Health{TimeoutSecs: ptr(60)}}, Pending); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the probe did not reach the engine")
	}
	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the hung probe")
	}
}

func TestHTTPProberTLS(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"status":"ok"}`))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()

	err := privateProber(t).Probe(context.Background(), httpTarget(srv.URL))
	var pe *ProbeError
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Reason, "connection error") || !strings.Contains(pe.Reason, "certificate") {
		t.Fatalf("Probe() with the system roots = %v, want a certificate error", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	p := &HTTPProber{pool: newEnginePool(roots)}
	defer p.pool.closeIdle()
	before := conns.Load()
	for range 3 {
		if err := p.Probe(context.Background(), httpTarget(srv.URL)); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load() - before; n != 1 {
		t.Errorf("3 probes opened %d connections, want 1", n)
	}
}

// TestHTTPProberClient: a prober given a net/http client sends its probes through it.
func TestHTTPProberClient(t *testing.T) {
	h := &headerLog{code: 503}
	srv := startServer(t, h)
	tr := newTransport(nil)
	defer tr.CloseIdleConnections()
	tg := httpTarget(srv.URL)
	tg.APIKey = "sk-client-key"
	err := (&HTTPProber{Client: &http.Client{Transport: tr}}).Probe(context.Background(), tg)
	var pe *ProbeError
	if !errors.As(err, &pe) || pe.StatusCode != 503 {
		t.Fatalf("Probe() = %v, want status 503", err)
	}
	r := h.last(t)
	if r.Header.Get("Authorization") != "Bearer sk-client-key" || r.Header.Get("X-Mesh-Gateway") != "gw-1" ||
		!strings.HasPrefix(r.UserAgent(), "Go-http-client") {
		t.Errorf("request headers = %v, want net/http's with the key and node id", r.Header)
	}
}

// TestHTTPProberAbortsAnAbandonedProbe: a probe given up (its timeout, or its owner stopped it)
// closes its connection with a reset, not a FIN. After a FIN the kernel keeps retransmitting
// what the engine had not acknowledged, for minutes over a link that held it (docs/chaos.md,
// finding 18: a probe reached its engine 42 s after it was given up, once its owner had moved);
// a reset drops it, so no probe reaches an engine after it was abandoned. The engine sees the
// reset as ECONNRESET where a close would read as the end of the stream.
func TestHTTPProberAbortsAnAbandonedProbe(t *testing.T) {
	got := make(chan struct{}, 1)
	ended := make(chan error, 1)
	e := startRawEngine(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err != nil {
			return
		}
		got <- struct{}{}
		_, err := io.Copy(io.Discard, br)
		ended <- err
	})
	p := privateProber(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Probe(ctx, httpTarget(e.URL)) }()
	<-got
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a probe of an engine that never answers succeeded")
	}
	select {
	case err := <-ended:
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("the engine's read of the abandoned probe's connection ended with %v; want a reset (ECONNRESET), not the end of the stream", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned probe's connection was not closed within 10 s")
	}
}
