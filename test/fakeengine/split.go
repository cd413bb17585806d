package fakeengine

import (
	"bytes"
	"net"
	"sync"
	"time"
)

// http2Preface starts every HTTP/2 connection with prior knowledge, which is how gRPC clients
// connect in plain text. No HTTP/1.1 request starts with it.
var http2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// splitListener sorts the connections of one port by their first bytes: HTTP/2 (gRPC) to one
// listener, anything else (HTTP/1.1: /_fault, /_stats, curl) to the other. The gRPC server thus
// keeps its own native transport instead of running behind net/http.
type splitListener struct {
	ln        net.Listener
	h2, http1 *chanListener
	done      chan struct{}
	closeOnce sync.Once
}

func newSplitListener(ln net.Listener) *splitListener {
	done := make(chan struct{})
	return &splitListener{
		ln:    ln,
		h2:    &chanListener{addr: ln.Addr(), conns: make(chan net.Conn), done: done},
		http1: &chanListener{addr: ln.Addr(), conns: make(chan net.Conn), done: done},
		done:  done,
	}
}

// run accepts until the listener closes, sniffing each connection in its own goroutine so that
// a silent client cannot hold up the others.
func (s *splitListener) run(e *Engine) {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			s.close()
			return
		}
		e.goSafe("sniff connection", func() { s.route(conn) })
	}
}

// route reads only as far as the bytes match the HTTP/2 preface, so that a short HTTP/1.1
// request is not held waiting for 24 bytes.
func (s *splitListener) route(conn net.Conn) {
	head := make([]byte, len(http2Preface))
	n := 0
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for n < len(head) && bytes.Equal(head[:n], http2Preface[:n]) {
		m, err := conn.Read(head[n:])
		n += m
		if err != nil {
			break
		}
	}
	_ = conn.SetReadDeadline(time.Time{})
	if n == 0 {
		conn.Close()
		return
	}
	dst := s.http1
	if bytes.Equal(head[:n], http2Preface) {
		dst = s.h2
	}
	select {
	case dst.conns <- &prefixConn{Conn: conn, prefix: head[:n]}:
	case <-s.done:
		conn.Close()
	}
}

func (s *splitListener) close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		err = s.ln.Close()
	})
	return err
}

// chanListener is a net.Listener fed by a splitListener.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close does nothing: the splitListener owns the socket and closes both halves at once.
func (l *chanListener) Close() error   { return nil }
func (l *chanListener) Addr() net.Addr { return l.addr }

// prefixConn replays the sniffed bytes before reading on.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
