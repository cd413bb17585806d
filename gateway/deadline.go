package gateway

import (
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// maxDeadlineSlack bounds how late an upstream attempt's timeout may fire (lazyDeadlineConn).
const maxDeadlineSlack = time.Second

// deadlineSlack is how late an attempt's timeout may fire for a request timeout of d: 1/64 of
// it, at most maxDeadlineSlack (47 ms for a timeout of 3 s, 1 s for the default 30 minutes).
func deadlineSlack(d time.Duration) time.Duration { return min(d/64, maxDeadlineSlack) }

// lazyDeadlineConn is an upstream connection whose deadlines are armed late instead of at every
// request. fasthttp's HostClient sets a write and a read deadline per request, RequestTimeout
// from now; each moves a runtime timer, about 100 ns, a percent or two of what a plain request
// costs the gateway. The wrapper passes a deadline on only when it is past the armed one, or
// earlier than it by more than slack, and then arms it slack later than asked. So an attempt's
// timeout fires between RequestTimeout and RequestTimeout + slack after it began, and a
// connection in steady use moves its timers about once per slack instead of twice per request.
// A zero deadline (none) is passed on at once, and one in the past (an abort) without slack,
// unless the armed one already fires within slack of it.
type lazyDeadlineConn struct {
	net.Conn
	slack int64
	// The armed deadlines in Unix nanoseconds, 0 for none. Atomic because net.Conn's methods
	// may be called concurrently; fasthttp calls them from the one goroutine using the
	// connection.
	read, write atomic.Int64

	// Set by awaitAnswers (answerwait.go): the raw connection, the size below which a write
	// is a flush, and the wait's callback with its state; wroteSinceRead says a write came
	// after the last read (HostClient has one reader or writer at a time on a connection).
	raw            syscall.RawConn
	flushBelow     int
	onReadable     func(fd uintptr) bool
	pending        []byte
	wrote          int
	waited         bool
	wroteSinceRead bool
}

// lazyDeadline wraps c so that its deadlines are armed late, slack after the asked ones
// (none when slack is 0).
func lazyDeadline(c net.Conn, slack time.Duration) net.Conn {
	if slack <= 0 {
		return c
	}
	return &lazyDeadlineConn{Conn: c, slack: int64(slack)}
}

func (c *lazyDeadlineConn) SetReadDeadline(t time.Time) error {
	return c.set(&c.read, t, c.Conn.SetReadDeadline)
}

func (c *lazyDeadlineConn) SetWriteDeadline(t time.Time) error {
	return c.set(&c.write, t, c.Conn.SetWriteDeadline)
}

func (c *lazyDeadlineConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// set arms the deadline held in armed for t, through setter when the armed one does not do.
func (c *lazyDeadlineConn) set(armed *atomic.Int64, t time.Time, setter func(time.Time) error) error {
	if t.IsZero() {
		if armed.Load() == 0 {
			return nil
		}
		armed.Store(0)
		return setter(t)
	}
	want, cur := t.UnixNano(), armed.Load()
	if cur != 0 && want <= cur && cur-want <= c.slack {
		return nil // the armed deadline fires at most slack after t
	}
	if !t.After(time.Now()) { // an abort: no slack
		armed.Store(want)
		return setter(t)
	}
	late := t.Add(time.Duration(c.slack))
	armed.Store(late.UnixNano())
	return setter(late)
}
