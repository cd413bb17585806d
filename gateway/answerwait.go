package gateway

import (
	"syscall"
	"time"
)

// An upstream connection that awaits answers saves one system call per request. Go's Read
// reads first and waits in the poller only after a read that found the socket empty (EAGAIN),
// and right after a request is written the answer has not come yet: so each plain request
// cost the gateway a read that found nothing. HAProxy reads only once epoll reports data.
//
// Go's public API has no wait that keeps a readiness the poller recorded before it: a raw read
// (syscall.RawConn.Read) first clears it, so waiting after the write would miss an answer that
// arrived in between. The write is therefore made inside that wait, from its callback, after
// the clearing: the answer can only arrive after the request, so its arrival always wakes the
// wait. Then the Read that follows finds it.
//
// Only a write that is a whole request may wait. Not a part of one: the worker would be waiting
// for the rest while the gateway waits for its answer. And not the last part of one either: the
// worker may have answered the first parts already (an early 413), and that answer's readiness
// is what the wait clears. fasthttp's HostClient writes through a bufio.Writer of
// upstreamBufferSize bytes, which writes less than that only when flushed, and HostClient
// flushes once, at the end of a request: so a write shorter than the buffer, with no other
// write since the last read, is a whole request. A request with a body sent as it arrives
// flushes each chunk, the first one included, and goes through a pool of its own
// (streamedClient). TLS connections do not wait either: a TLS 1.3 client's Finished message
// gets no answer.
//
// The same cannot be done on the client's side, after an answer, for the client's next
// request: a client may send it before the answer is written (pipelining), and the wait would
// clear the readiness of a request already in the socket.

// awaitAnswers makes c, a plain TCP connection to a worker, wait for the answer in a write
// shorter than flushBelow, the HostClient's write buffer size (writeAwaiting).
func (c *lazyDeadlineConn) awaitAnswers(flushBelow int) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	c.raw, c.flushBelow = raw, flushBelow
	c.onReadable = c.writeThenWait // made once: a method value passed at each write would allocate
}

// Write writes b; a write that is a whole request also waits for the answer.
func (c *lazyDeadlineConn) Write(b []byte) (int, error) {
	whole := !c.wroteSinceRead && len(b) > 0 && len(b) < c.flushBelow
	c.wroteSinceRead = true
	if c.onReadable == nil || !whole {
		return c.Conn.Write(b)
	}
	return c.writeAwaiting(b)
}

// Read reads from the connection; the next write starts a request.
func (c *lazyDeadlineConn) Read(p []byte) (int, error) {
	c.wroteSinceRead = false
	return c.Conn.Read(p)
}

// writeAwaiting writes b from inside a wait for the connection to become readable. The wait is
// bounded by the read deadline, armed here at the write's (HostClient arms the read deadline
// only once the write returns, to the same request timeout, so it then finds it armed). The
// wait's own error, a deadline or a closed connection, is the next Read's too, and is left to
// it; a write the socket did not take whole is finished as an ordinary write, without the wait.
func (c *lazyDeadlineConn) writeAwaiting(b []byte) (int, error) {
	w := c.write.Load()
	if w == 0 { // no write deadline: nothing would bound the wait
		return c.Conn.Write(b)
	}
	if r := c.read.Load(); r == 0 || r < w {
		if err := c.Conn.SetReadDeadline(time.Unix(0, w)); err != nil {
			return c.Conn.Write(b)
		}
		c.read.Store(w)
	}
	c.pending, c.wrote, c.waited = b, 0, false
	_ = c.raw.Read(c.onReadable)
	n := c.wrote
	c.pending = nil
	if n == len(b) {
		return n, nil
	}
	m, err := c.Conn.Write(b[n:])
	return n + m, err
}

// writeThenWait is the wait's callback: its first call writes, and asks to wait when all was
// written; the next, once the connection is readable, ends the wait.
func (c *lazyDeadlineConn) writeThenWait(fd uintptr) bool {
	if c.waited {
		return true
	}
	c.waited = true
	for c.wrote < len(c.pending) {
		n, err := syscall.Write(int(fd), c.pending[c.wrote:])
		if n > 0 {
			c.wrote += n
		}
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 { // the socket is full (EAGAIN) or failed: no wait
			return true
		}
	}
	return false
}
