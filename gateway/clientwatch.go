package gateway

import (
	"crypto/tls"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"syscall"
	"time"
)

// defaultClientWatchAfter is how long a stream runs before its client connection is watched.
const defaultClientWatchAfter = 500 * time.Millisecond

// clientWatch notices a client that closes its connection while its stream waits on the
// upstream. A relay otherwise learns that the client left only when a write fails, and it
// writes only when the upstream sends: a client that leaves while the model is silent would
// keep its admission slot and the upstream request until the next event or the attempt timeout.
//
// The watch peeks at the connection (nothing is consumed, so a pipelined request stays for
// fasthttp) from a goroutine parked in the netpoller. It starts only once a stream has run for
// Config.clientWatchAfter, so short streams pay for one timer. It is part of the pooled call's
// relay: the timer is made once and reset for each stream.
type clientWatch struct {
	mu    sync.Mutex
	state watchState
	conn  net.Conn   // the client connection; only one with a file descriptor is watched
	pipe  *relayPipe // told once the client closed its connection
	log   *slog.Logger
	timer *time.Timer
	done  chan struct{} // closed when a started watch ends
}

type watchState uint8

const (
	watchOff      watchState = iota // stopped, or never armed
	watchArmed                      // the timer runs
	watchWatching                   // the watch goroutine peeks
)

// arm starts the timer for a new stream on conn; pipe learns if the client leaves.
func (w *clientWatch) arm(conn net.Conn, after time.Duration, pipe *relayPipe, log *slog.Logger) {
	if tc, ok := conn.(*tls.Conn); ok {
		// --tls-http: peek at the TCP connection under TLS. A client gone without a
		// close_notify shows as an end of stream; one that sent it shows as data, and goes
		// unnoticed, as a pipelined request does.
		conn = tc.NetConn()
	}
	if _, ok := conn.(syscall.Conn); !ok {
		return
	}
	w.mu.Lock()
	w.state, w.conn, w.pipe, w.log = watchArmed, conn, pipe, log
	w.mu.Unlock()
	if w.timer == nil {
		w.timer = time.AfterFunc(after, w.watch)
		return
	}
	w.timer.Reset(after)
}

// watch runs on the timer's goroutine: it peeks until the client closes, sends data, or stop
// interrupts it.
func (w *clientWatch) watch() {
	w.mu.Lock()
	if w.state != watchArmed {
		w.mu.Unlock()
		return
	}
	if s, ok := w.conn.(interface{ settle() error }); ok {
		// The peek below waits in the poller, past slackReadConn's Read: its timer must not
		// fire before the deadline asked. Done before stop can see the watch, so that stop's
		// deadline in the past comes after it.
		_ = s.settle()
	}
	w.state, w.done = watchWatching, make(chan struct{})
	conn, pipe, log, done := w.conn, w.pipe, w.log, w.done
	w.mu.Unlock()
	defer close(done)
	defer func() {
		if p := recover(); p != nil {
			log.Error("client watch panicked", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	// SyscallConn allocates, so it is asked for only here, once the stream has lasted.
	rc, err := conn.(syscall.Conn).SyscallConn()
	if err == nil && peerClosed(rc) {
		pipe.leave()
	}
}

// stop ends the watch of the current stream; once it returns, the watch no longer touches the
// connection. A watch in progress is interrupted with a read deadline in the past, which
// fasthttp resets before it reads the next request.
func (w *clientWatch) stop() {
	w.mu.Lock()
	st, conn, done := w.state, w.conn, w.done
	w.state, w.conn, w.pipe, w.log = watchOff, nil, nil, nil
	w.mu.Unlock()
	switch st {
	case watchArmed:
		w.timer.Stop() // a callback already started sees watchOff and returns
	case watchWatching:
		_ = conn.SetReadDeadline(time.Unix(1, 0))
		<-done
	}
}
