package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// serveOne is a worker's end of one upstream connection: it accepts a connection of ln, runs
// serve on it and closes it. The channel it returns is closed once that is done.
func serveOne(ln net.Listener, serve func(net.Conn)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	return done
}

// serveEach runs serve on every connection of ln, one after the other, closing each after it,
// until ln is closed.
func serveEach(ln net.Listener, serve func(net.Conn)) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serve(c)
			_ = c.Close()
		}
	}()
}

// awaitingPeer serves one connection of ln (serveOne), reading requests of n bytes and
// answering each with answer, unless answer is nil. Before each answer it closes the next
// channel of answered.
func awaitingPeer(ln net.Listener, n int, answer []byte, answered []chan struct{}) <-chan struct{} {
	return serveOne(ln, func(c net.Conn) {
		buf := make([]byte, n)
		for i := 0; ; i++ {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if answer == nil {
				continue
			}
			close(answered[i])
			if _, err := c.Write(answer); err != nil {
				return
			}
		}
	})
}

// dialAwaiting is an upstream connection to ln as the gateway dials one for a plain HTTP
// worker, its deadlines armed slack late.
func dialAwaiting(t *testing.T, ln net.Listener, slack time.Duration) *lazyDeadlineConn {
	t.Helper()
	c, err := upstreamDial(defaultDial(false), slack, true)(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	lc, ok := c.(*lazyDeadlineConn)
	if !ok || lc.onReadable == nil {
		t.Fatalf("upstreamDial made %T, not a connection that awaits answers", c)
	}
	return lc
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// returns runs f and fails the test if it does not return (testkit.For's deadline): a write
// that waits for an answer that never comes must still end.
func returns(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	testkit.For(t, what+" to return", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

// readAnswer reads the worker's answer, want, from c.
func readAnswer(t *testing.T, c net.Conn, want string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, len(want))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != want {
		t.Fatalf("answer %q, %v; want %q", buf, err, want)
	}
}

// The write of a whole request returns once the answer can be read, so the read after it
// finds the answer rather than an empty socket (a system call that found nothing, saved).
// Three requests on one connection: the first arms the read deadline, the others find it armed.
func TestRequestWriteReturnsWithTheAnswer(t *testing.T) {
	ln := listenLoopback(t)
	answered := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	done := awaitingPeer(ln, 4, []byte("pong"), answered)
	c := dialAwaiting(t, ln, deadlineSlack(time.Minute))
	for i := range answered {
		_ = c.SetWriteDeadline(time.Now().Add(time.Minute)) // as HostClient does before each request
		if n, err := c.Write([]byte("ping")); n != 4 || err != nil {
			t.Fatalf("request %d: wrote %d bytes, %v", i, n, err)
		}
		select {
		case <-answered[i]:
		default:
			t.Fatalf("request %d: the write returned before the worker answered", i)
		}
		readAnswer(t, c, "pong")
	}
	_ = c.Close()
	<-done
}

// A worker that never answers holds the write only until the request timeout, even on a new
// connection, whose read deadline HostClient has not armed yet; the read after it then times
// out as it would have.
func TestAwaitedWriteEndsAtTheRequestTimeout(t *testing.T) {
	ln := listenLoopback(t)
	done := awaitingPeer(ln, 4, nil, nil)
	c := dialAwaiting(t, ln, time.Millisecond)
	_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	returns(t, "a write to a worker that never answers", func() {
		if n, err := c.Write([]byte("ping")); n != 4 || err != nil {
			t.Errorf("wrote %d bytes, %v", n, err)
		}
	})
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var ne net.Error
	if _, err := c.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read after the request timeout: %v, want a timeout", err)
	}
	_ = c.Close()
	<-done
}

// Only a write shorter than the HostClient's buffer waits: a full buffer is part of a larger
// request, whose worker answers only once it has the rest.
func TestFullBufferWriteDoesNotWait(t *testing.T) {
	ln := listenLoopback(t)
	done := awaitingPeer(ln, upstreamBufferSize, nil, nil)
	c := dialAwaiting(t, ln, time.Second)
	_ = c.SetWriteDeadline(time.Now().Add(time.Hour))
	returns(t, "a full buffer's write", func() {
		if n, err := c.Write(make([]byte, upstreamBufferSize)); n != upstreamBufferSize || err != nil {
			t.Errorf("wrote %d bytes, %v", n, err)
		}
	})
	_ = c.Close()
	<-done
}

// A keep-alive connection the worker closed while it was idle: the write to it ends at once
// (the worker's reset wakes the wait), and the read after it still reports the end of the
// stream, as without the wait, which HostClient retries on a new connection (retryStaleConn).
func TestAwaitedWriteOnAConnectionTheWorkerClosed(t *testing.T) {
	ln := listenLoopback(t)
	closed := serveOne(ln, func(net.Conn) {})
	c := dialAwaiting(t, ln, time.Second)
	<-closed
	_ = c.SetWriteDeadline(time.Now().Add(time.Hour))
	returns(t, "a write to a closed connection", func() { _, _ = c.Write([]byte("ping")) })
	_ = c.SetReadDeadline(time.Now().Add(time.Hour))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read on a connection the worker closed: %v, want EOF (HostClient retries that)", err)
	}
}

// A request the socket does not take in one write is finished as an ordinary write: all of it
// reaches the worker, and its answer is read.
func TestAwaitedWriteTheSocketTakesInParts(t *testing.T) {
	const size = 1 << 20
	ln := listenLoopback(t)
	answered := []chan struct{}{make(chan struct{})}
	done := awaitingPeer(ln, size, []byte("pong"), answered)
	c := dialAwaiting(t, ln, time.Second)
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10) // far below size: the first write cannot take it all
	}
	c.awaitAnswers(2 * size)
	_ = c.SetWriteDeadline(time.Now().Add(time.Minute))
	req := bytes.Repeat([]byte("p"), size)
	if n, err := c.Write(req); n != size || err != nil {
		t.Fatalf("wrote %d of %d bytes, %v", n, size, err)
	}
	readAnswer(t, c, "pong")
	_ = c.Close()
	<-done
}

// A request written in parts does not wait at its last part: the worker may have answered the
// first part already (here, an early answer on a connection it keeps open), and the wait would
// clear that answer's readiness and then wait for a second answer that never comes.
func TestRequestInPartsDoesNotWaitAtItsEnd(t *testing.T) {
	ln := listenLoopback(t)
	answeredEarly := make(chan struct{})
	done := serveOne(ln, func(c net.Conn) {
		if _, err := io.ReadFull(c, make([]byte, upstreamBufferSize)); err != nil {
			return
		}
		_, err := c.Write([]byte("early"))
		close(answeredEarly)
		if err == nil {
			_, _ = io.Copy(io.Discard, c) // reads the rest, answers nothing more
		}
	})
	c := dialAwaiting(t, ln, time.Second)
	_ = c.SetWriteDeadline(time.Now().Add(time.Hour))
	if _, err := c.Write(make([]byte, upstreamBufferSize)); err != nil {
		t.Fatal(err)
	}
	<-answeredEarly
	returns(t, "the last part of a request", func() { _, _ = c.Write([]byte("tail")) })
	readAnswer(t, c, "early")
	_ = c.Close()
	<-done
}

// A worker that closes each connection after its answer, without saying so (as a server whose
// keep-alive timeout is shorter than the gateway's does): every request after the first finds
// its pooled connection closed, and still gets the worker's answer at the first attempt, with
// no failure recorded against the worker. The gateway's write to the closed connection waits
// for an answer; the worker's reset ends the wait, and HostClient resends on a new connection.
func TestWorkerClosingIdleConnectionsCostsNoAttempt(t *testing.T) {
	ln := listenLoopback(t)
	serveEach(ln, func(c net.Conn) {
		if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			_, _ = io.Copy(io.Discard, req.Body)
			const body = `{"served_by":"closer"}`
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 22\r\n\r\n"+body)
		}
	})
	e := newEnv(t, Config{})
	w := e.add(worker.Spec{URL: "http://" + ln.Addr().String()})
	for i := range 3 {
		status, hdr, body := e.post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		if status != 200 || body != `{"served_by":"closer"}` || hdr.Get("X-Mesh-Route-Attempt") != "1" {
			t.Fatalf("request %d: %d, attempt %q, %q", i, status, hdr.Get("X-Mesh-Route-Attempt"), body)
		}
	}
	for _, o := range e.outcomesCopy() {
		if o.worker != w.ID || o.status != 200 || o.connErr {
			t.Errorf("outcome %+v, want 200 from %s", o, w.ID)
		}
	}
}

// Only a worker's plain-TCP pool for buffered bodies waits for answers: not a TLS worker's (a
// TLS 1.3 client's Finished message gets no answer), and not the pool for bodies sent as they
// arrive (streamedClient), made once per worker.
func TestOnlyThePlainBufferedPoolAwaitsAnswers(t *testing.T) {
	ln := listenLoopback(t)
	serveEach(ln, func(net.Conn) {})
	e := newEnv(t, Config{})
	for _, tt := range []struct{ tls, streamed, await bool }{
		{false, false, true}, {true, false, false}, {false, true, false}, {true, true, false},
	} {
		c, err := e.gw.newHostClient(ln.Addr().String(), tt.tls, tt.streamed).Dial(ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		lc, ok := c.(*lazyDeadlineConn)
		if !ok || (lc.onReadable != nil) != tt.await {
			t.Errorf("tls %v, streamed %v: %T awaiting answers %v, want %v", tt.tls, tt.streamed, c, ok && lc.onReadable != nil, tt.await)
		}
		_ = c.Close()
	}
	up := &upstream{host: ln.Addr().String(), scheme: "http"}
	if hc := e.gw.streamedClient(up); hc == nil || e.gw.streamedClient(up) != hc {
		t.Error("streamedClient made a second pool for the same worker")
	}
}
