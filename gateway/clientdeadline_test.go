package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/test/testkit"
)

// countingListener counts the read deadlines set on the connections it accepts.
type countingListener struct {
	net.Listener
	sets *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, sets: l.sets}, nil
}

type countingConn struct {
	net.Conn
	sets *atomic.Int64
}

func (c *countingConn) SetReadDeadline(t time.Time) error {
	c.sets.Add(1)
	return c.Conn.SetReadDeadline(t)
}

func (c *countingConn) SetDeadline(t time.Time) error {
	c.sets.Add(1)
	return c.Conn.SetDeadline(t)
}

// TestClientReadDeadlinesMovedRarely: fasthttp asks for two read deadlines per request on a
// keep-alive connection (the idle timeout, then the request timeout); through ClientListener
// the socket's timer moves a few times for a hundred requests, not twice for each.
func TestClientReadDeadlinesMovedRarely(t *testing.T) {
	e := newEnv(t, Config{RequestTimeout: 30 * time.Second})
	e.upstream(okHandler("w1"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var sets atomic.Int64
	go func() { _ = e.gw.Serve(e.gw.ClientListener(countingListener{ln, &sets})) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	const requests = 100
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for i := range requests {
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	if got := sets.Load(); got > 4 {
		t.Fatalf("the socket's read deadline was moved %d times for %d requests, want at most 4", got, requests)
	}
}

// TestSlackReadsTimeOutWithinSlack: a read deadline fires no sooner than asked and at most
// slack after; a timer armed for an earlier deadline than the one now asked is a false alarm
// the reader never sees; no deadline means none; one in the past aborts at once.
func TestSlackReadsTimeOutWithinSlack(t *testing.T) {
	const slack = time.Second
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		c := slackReads(a, slack)
		buf := make([]byte, 8)
		read := func() (time.Duration, error) {
			start := time.Now()
			_, err := c.Read(buf)
			return time.Since(start), err
		}

		// The idle deadline, then the request's: the first timer, armed for the idle one,
		// fires early and is armed again.
		_ = c.SetReadDeadline(time.Now().Add(90 * time.Second))
		_ = c.SetReadDeadline(time.Now().Add(1800 * time.Second))
		took, err := read()
		if !errors.Is(err, os.ErrDeadlineExceeded) || took < 1800*time.Second || took > 1800*time.Second+slack {
			t.Fatalf("a 1800 s deadline: %v after %v", err, took)
		}

		// Data before the deadline is read; a false alarm before it is not seen.
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(30 * time.Second)
			_, _ = b.Write([]byte("x"))
		})
		if took, err = read(); err != nil || took != 30*time.Second {
			t.Fatalf("data at 30 s under a 60 s deadline: %v after %v", err, took)
		}
		wg.Wait()

		// No deadline: the armed timer is a false alarm too.
		_ = c.SetReadDeadline(time.Time{})
		wg.Go(func() {
			time.Sleep(time.Hour)
			_, _ = b.Write([]byte("y"))
		})
		if took, err = read(); err != nil || took != time.Hour {
			t.Fatalf("data after an hour without a deadline: %v after %v", err, took)
		}
		wg.Wait()

		// A deadline in the past aborts a blocked read at once.
		wg.Go(func() {
			time.Sleep(5 * time.Second)
			_ = c.SetReadDeadline(time.Unix(1, 0))
		})
		if took, err = read(); !errors.Is(err, os.ErrDeadlineExceeded) || took != 5*time.Second {
			t.Fatalf("an abort at 5 s: %v after %v", err, took)
		}
		wg.Wait()
	})
}

// TestSlackReadsSettle: settle arms the timer for the deadline asked, so that a wait past Read
// (the client watch's peek) meets no false alarm.
func TestSlackReadsSettle(t *testing.T) {
	rec := &deadlineRecorder{}
	c := slackReads(rec, time.Second).(*slackReadConn)
	now := time.Now()
	_ = c.SetReadDeadline(now.Add(90 * time.Second))
	_ = c.SetReadDeadline(now.Add(1800 * time.Second)) // recorded, not armed
	if len(rec.reads) != 1 {
		t.Fatalf("deadlines set: %v", rec.reads)
	}
	_ = c.settle()
	if len(rec.reads) != 2 || !rec.reads[1].Equal(now.Add(1801*time.Second)) {
		t.Fatalf("after settle: %v, want the last %v", rec.reads, now.Add(1801*time.Second))
	}
	_ = c.settle() // armed for it already
	_ = c.SetReadDeadline(time.Time{})
	_ = c.settle()
	if len(rec.reads) != 3 || !rec.reads[2].IsZero() {
		t.Fatalf("settle without a deadline: %v", rec.reads)
	}
}

// TestClientWatchAfterAnEarlyTimer: on a keep-alive connection the socket's timer stays armed
// for the idle timeout while a request's longer deadline is only recorded; a stream's client
// watch peeks past Read, so it must settle the timer first, or it meets the early timer as a
// timeout, stops watching, and misses the client leaving.
func TestClientWatchAfterAnEarlyTimer(t *testing.T) {
	e := newEnv(t, Config{clientWatchAfter: 100 * time.Millisecond, clientIdleTimeout: 20 * time.Millisecond})
	next, gone := make(chan struct{}), make(chan struct{})
	defer close(next)
	paused := pausedUpstream(next, gone)
	e.upstream(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-First") != "" {
			_, _ = io.WriteString(rw, `{"ok":true}`)
			return
		}
		paused(rw, r)
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Both at once: the second request is read at once after the first answer, under the idle
	// timer (20 ms), and streams past it.
	first := `{"model":"m"}`
	_, _ = fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-First: 1\r\nContent-Length: %d\r\n\r\n%s%s",
		len(first), first, streamRequest(`{"stream":true}`))
	readUntil(t, bufio.NewReader(conn), "data: 1")
	testkit.For(t, "the client watch to peek", watching)
	_ = conn.Close()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the gateway kept the upstream request of a client that left")
	}
}
