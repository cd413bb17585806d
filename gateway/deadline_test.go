package gateway

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// deadlineRecorder is a connection that records the deadlines set on it.
type deadlineRecorder struct {
	net.Conn
	reads, writes []time.Time
}

func (r *deadlineRecorder) SetReadDeadline(t time.Time) error {
	r.reads = append(r.reads, t)
	return nil
}
func (r *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	r.writes = append(r.writes, t)
	return nil
}

func TestLazyDeadlineArmsLateAndSkipsWithinSlack(t *testing.T) {
	rec := &deadlineRecorder{}
	slack := 100 * time.Millisecond
	c := lazyDeadline(rec, slack)
	now := time.Now()
	t0 := now.Add(time.Minute)
	_ = c.SetReadDeadline(t0)
	if len(rec.reads) != 1 || !rec.reads[0].Equal(t0.Add(slack)) {
		t.Fatalf("first deadline: set %v, want %v", rec.reads, t0.Add(slack))
	}
	// Later requests within slack keep the armed deadline: it fires at most slack after theirs.
	for _, d := range []time.Duration{0, time.Millisecond, slack} {
		_ = c.SetReadDeadline(t0.Add(d))
	}
	if len(rec.reads) != 1 {
		t.Fatalf("deadlines within slack were set: %v", rec.reads)
	}
	// Past the armed one: armed again, slack later.
	_ = c.SetReadDeadline(t0.Add(slack + time.Millisecond))
	if len(rec.reads) != 2 || !rec.reads[1].Equal(t0.Add(2*slack+time.Millisecond)) {
		t.Fatalf("a deadline past the armed one: set %v", rec.reads)
	}
	// Earlier than the armed one by more than slack: passed on (with slack), never left late.
	_ = c.SetReadDeadline(now.Add(time.Second))
	if len(rec.reads) != 3 || !rec.reads[2].Equal(now.Add(time.Second+slack)) {
		t.Fatalf("an earlier deadline: set %v", rec.reads)
	}
	// An abort (a deadline in the past) is passed on as it is, and so is none.
	abort := time.Unix(1, 0)
	_ = c.SetReadDeadline(abort)
	_ = c.SetReadDeadline(time.Time{})
	_ = c.SetReadDeadline(time.Time{}) // none already: nothing to do
	if len(rec.reads) != 5 || !rec.reads[3].Equal(abort) || !rec.reads[4].IsZero() {
		t.Fatalf("abort and none: set %v", rec.reads)
	}
	// The write deadline is armed on its own, and SetDeadline sets both.
	_ = c.SetDeadline(t0)
	if len(rec.writes) != 1 || len(rec.reads) != 6 || !rec.writes[0].Equal(t0.Add(slack)) {
		t.Fatalf("SetDeadline: reads %v, writes %v", rec.reads, rec.writes)
	}
}

func TestDeadlineSlack(t *testing.T) {
	for _, c := range []struct{ timeout, want time.Duration }{
		{3 * time.Second, 3 * time.Second / 64},
		{100 * time.Millisecond, 100 * time.Millisecond / 64},
		{30 * time.Minute, time.Second},
	} {
		if got := deadlineSlack(c.timeout); got != c.want {
			t.Errorf("deadlineSlack(%v) = %v, want %v", c.timeout, got, c.want)
		}
	}
}

// BenchmarkUpstreamDeadlines is what fasthttp's HostClient does to a connection's deadlines per
// request (a write and a read deadline, RequestTimeout from now), on a loopback TCP connection,
// with and without lazyDeadlineConn.
func BenchmarkUpstreamDeadlines(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_, _ = c.Read(make([]byte, 1))
			c.Close()
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	const timeout = 30 * time.Minute
	lazy := lazyDeadline(raw, deadlineSlack(timeout))
	for _, bc := range []struct {
		name string
		c    net.Conn
	}{{"every-request", raw}, {"lazy", lazy}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				_ = bc.c.SetWriteDeadline(time.Now().Add(timeout))
				_ = bc.c.SetReadDeadline(time.Now().Add(timeout))
			}
		})
	}
}

// TestReusedConnectionTimesOutWithinSlack: an upstream connection that served requests (so its
// deadlines are armed and mostly left alone) still times out an attempt that gets no answer:
// not before --request-timeout-secs, and within its slack after it, with the 504 a timeout
// answers.
func TestReusedConnectionTimesOutWithinSlack(t *testing.T) {
	const timeout = 400 * time.Millisecond
	e := newEnv(t, Config{Policy: "round_robin", RequestTimeout: timeout})
	var served atomic.Int32
	done := make(chan struct{})
	e.upstream(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || served.Add(1) <= 20 {
			_, _ = w.Write([]byte(`{"object":"chat.completion"}`))
			return
		}
		select { // the 21st request: no answer
		case <-r.Context().Done():
		case <-done:
		}
	})
	t.Cleanup(func() { close(done) })
	for i := range 20 {
		if status, _, body := e.post("/v1/chat/completions", `{"model":"m"}`); status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
	start := time.Now()
	status, _, _ := e.post("/v1/chat/completions", `{"model":"m"}`)
	took := time.Since(start)
	if status != http.StatusGatewayTimeout {
		t.Fatalf("the hung request answered %d, want 504", status)
	}
	// The lower bound is the point; the upper one leaves room for a loaded machine.
	if took < timeout || took > timeout+deadlineSlack(timeout)+2*time.Second {
		t.Errorf("the hung request took %v, want %v to %v plus scheduling", took, timeout, timeout+deadlineSlack(timeout))
	}
}

// TestHTTPSWorkerOverLazyDeadlines: the upstream dial keeps TLS. An https worker answers
// model requests through the gateway, TLS running over the connection wrapped for lazy
// deadlines, and a later request reuses the connection.
func TestHTTPSWorkerOverLazyDeadlines(t *testing.T) {
	e := newEnv(t, Config{Policy: "round_robin"})
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"object":"chat.completion"}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	w := e.add(worker.Spec{URL: srv.URL})
	up := upstreamOf(w)
	up.ready()
	up.hc.TLSConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig // trusts the test's certificate
	for i := range 3 {
		if status, hdr, body := e.post("/v1/chat/completions", `{"model":"m"}`); status != http.StatusOK || hdr.Get("X-Mesh-Worker") != string(w.ID) {
			t.Fatalf("request %d: %d from %q: %s", i, status, hdr.Get("X-Mesh-Worker"), body)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d TLS connections for 3 requests in a row, want 1 kept alive", n)
	}
}
