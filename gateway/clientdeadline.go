package gateway

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// defaultClientIdleTimeout is how long a client's keep-alive connection may stay idle.
const defaultClientIdleTimeout = 90 * time.Second

// slackReadConn is a client connection whose read deadline is moved rarely instead of twice per
// request. fasthttp's server asks for one deadline before each request's first byte (the idle
// timeout) and another once it arrives (the request timeout, for reading the rest): each moves a
// runtime timer. Here a deadline that is asked is only recorded, and the timer is moved only
// when it would fire more than slack after the deadline now asked. A timer that fires before
// the asked deadline (it was armed for an earlier one: the idle timeout while a long request is
// read) is a false alarm: Read arms it again for the deadline now asked, slack later, and reads
// on. So a deadline fires between the time asked and slack after it, and a connection in steady
// use moves its timer about once per idle timeout instead of twice per request. Only reads are
// deferred: write deadlines pass through (the server sets none per request).
//
// Upstream connections use lazyDeadlineConn instead, whose asks only grow (a request timeout
// from each request's start); here they alternate between a near and a far one, which it would
// pass on twice per request, since it never lets a timer fire early.
//
// Every method may be called from any goroutine; fasthttp calls them from the one serving the
// connection, a hijacked connection's handler from its own.
type slackReadConn struct {
	net.Conn
	slack int64
	// want is the read deadline asked, armed the one the timer is set for, in Unix
	// nanoseconds; 0 for none.
	want, armed atomic.Int64
}

// slackReads wraps c, arming its read deadlines up to slack late (none when slack is 0).
func slackReads(c net.Conn, slack time.Duration) net.Conn {
	if slack <= 0 {
		return c
	}
	return &slackReadConn{Conn: c, slack: int64(slack)}
}

func (c *slackReadConn) SetReadDeadline(t time.Time) error {
	if t.IsZero() {
		c.want.Store(0) // an armed timer that fires is a false alarm now
		return nil
	}
	want := t.UnixNano()
	c.want.Store(want)
	if a := c.armed.Load(); a != 0 && a-want <= c.slack {
		return nil // the timer fires at most slack after t; sooner is handled in Read
	}
	return c.arm(want)
}

func (c *slackReadConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

// arm sets the timer slack after want, or at want when that has passed (an abort).
func (c *slackReadConn) arm(want int64) error {
	at := want
	if want > time.Now().UnixNano() {
		at += c.slack
	}
	c.armed.Store(at)
	return c.Conn.SetReadDeadline(time.Unix(0, at))
}

// Read reads from the connection; a timeout before the deadline asked arms the timer for it
// and reads again.
func (c *slackReadConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if n > 0 || err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		if want := c.want.Load(); want != 0 && time.Now().UnixNano() >= want {
			return n, err // the deadline asked has passed
		}
		if err := c.settle(); err != nil {
			return 0, err
		}
	}
}

// settle arms the timer for the deadline asked when it would fire sooner (or at all, when none
// is asked): after a false alarm in Read, and before a reader that waits past Read (the client
// watch's peek), which would meet the false alarm as a timeout.
func (c *slackReadConn) settle() error {
	want, a := c.want.Load(), c.armed.Load()
	switch {
	case want == 0 && a == 0, want != 0 && a >= want && a-want <= c.slack:
		return nil
	case want == 0:
		c.armed.Store(0)
		return c.Conn.SetReadDeadline(time.Time{})
	}
	return c.arm(want)
}

var errNoSocket = errors.New("not a socket")

// SyscallConn and CloseWrite reach the socket underneath: the client watch peeks at it
// (clientwatch.go), and closeLingering half-closes it.
func (c *slackReadConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNoSocket
}

func (c *slackReadConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoSocket
}

// slackListener wraps the connections ln accepts in slackReadConn.
type slackListener struct {
	net.Listener
	slack time.Duration
}

func (l slackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return slackReads(c, l.slack), nil
}

// ClientListener wraps the data plane's listener so that its connections' read deadlines are
// moved rarely (slackReadConn), up to deadlineSlack of the shorter of the idle and request
// timeouts late. Put it under TLS, so that the TLS connection's deadlines reach it.
func (g *Gateway) ClientListener(ln net.Listener) net.Listener {
	return slackListener{Listener: ln, slack: deadlineSlack(min(g.cfg.clientIdleTimeout, g.cfg.RequestTimeout))}
}
