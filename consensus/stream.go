package consensus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Bounds of a guarded stream layer.
const (
	// handshakeTimeout bounds one accepted connection's handshake: a client that says
	// nothing is dropped after it.
	handshakeTimeout = 10 * time.Second
	// maxHandshakes bounds the handshakes in progress; a connection beyond it is closed at
	// once.
	maxHandshakes = 64
	// acceptRetry is the pause after an accept error other than a closed listener.
	acceptRetry = 50 * time.Millisecond
)

// streamGuard is what a guarded stream layer runs on each connection before raft reads or
// writes a byte on it: mutual TLS (tls.go), the proof of the cluster key (clusterkey), or
// nothing (plainGuard); the hello (hello.go) follows it.
type streamGuard struct {
	// name says what the handshake is, for the log.
	name string
	// refusal is the WARN line of a refused connection.
	refusal string
	// accept runs the server side on an accepted connection within ctx and returns the
	// connection raft uses.
	accept func(ctx context.Context, raw net.Conn) (net.Conn, error)
	// dial connects to addr and runs the client side, within ctx; timeout is raft's.
	dial func(ctx context.Context, addr raft.ServerAddress, timeout time.Duration) (net.Conn, error)
}

// guardedStream is raft's stream layer behind a handshake and the hello. Its own loop accepts
// TCP connections and handshakes each in its own goroutine, bounded in time and number, so that
// a client that never completes one holds up neither raft's accept loop nor other peers; Accept
// hands raft only connections whose handshake succeeded and whose hello, if any, was meant for
// this node. A refused handshake (no certificate, another CA, not a node certificate; no proof
// of the cluster key) or hello (another cluster, another server) is logged at WARN with the
// peer's address (spaced: refusals).
type guardedStream struct {
	raw       net.Listener
	advertise net.Addr
	guard     streamGuard
	hello     *raftHello // nil: no hello said or read (tests of the handshakes alone)
	log       *slog.Logger

	refused refusals

	ready chan net.Conn // handshaken, for Accept
	slots chan struct{} // one per handshake in progress
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	mu      sync.Mutex
	pending map[net.Conn]struct{} // raw connections whose handshake is in progress
}

// newGuardedStream starts accepting on ln, with hello's checks when it is not nil; Close stops
// it.
func newGuardedStream(ln net.Listener, advertise net.Addr, guard streamGuard, hello *raftHello, log *slog.Logger) *guardedStream {
	s := &guardedStream{
		raw: ln, advertise: advertise, guard: guard, hello: hello, log: log,
		ready: make(chan net.Conn), slots: make(chan struct{}, maxHandshakes), done: make(chan struct{}),
		pending: make(map[net.Conn]struct{}),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

func (s *guardedStream) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.raw.Accept()
		if err != nil {
			if s.closed() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("raft listener: accept failed", "err", err)
			t := time.NewTimer(acceptRetry)
			select {
			case <-s.done:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		select {
		case s.slots <- struct{}{}:
		default:
			s.log.Warn("raft listener: too many handshakes in progress; connection dropped", "handshake", s.guard.name, "remote", c.RemoteAddr().String())
			_ = c.Close()
			continue
		}
		if !s.track(c) {
			_ = c.Close()
			<-s.slots
			return
		}
		s.wg.Add(1)
		go s.handshake(c)
	}
}

// handshake completes the server side of one connection's handshake and hands it to Accept.
func (s *guardedStream) handshake(raw net.Conn) {
	defer s.wg.Done()
	defer func() { <-s.slots }()
	defer s.untrack(raw)
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	c, err := s.guard.accept(ctx, raw)
	if err != nil {
		if !s.closed() {
			s.refused.warn(s.log, s.guard.refusal, "remote", raw.RemoteAddr().String(), "err", err)
		}
		_ = raw.Close()
		return
	}
	if s.hello != nil {
		deadline, _ := ctx.Deadline()
		secured := c
		if c, err = s.hello.accept(secured, deadline); err != nil {
			if !s.closed() {
				s.hello.warn(raw.RemoteAddr().String(), err)
			}
			_ = secured.Close()
			return
		}
	}
	select {
	case s.ready <- c:
	case <-s.done:
		_ = c.Close()
	}
}

func (s *guardedStream) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed() {
		return false
	}
	s.pending[c] = struct{}{}
	return true
}

func (s *guardedStream) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, c)
}

func (s *guardedStream) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Accept implements net.Listener: the next connection whose handshake succeeded.
func (s *guardedStream) Accept() (net.Conn, error) {
	select {
	case c := <-s.ready:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: it stops accepting, drops the handshakes in progress and
// waits for its goroutines. Calling it again does nothing.
func (s *guardedStream) Close() error {
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		close(s.done)
		for c := range s.pending {
			_ = c.Close()
		}
		s.mu.Unlock()
		err = s.raw.Close()
		s.wg.Wait()
	})
	return err
}

// Addr is the advertised address: what raft records as this server's address.
func (s *guardedStream) Addr() net.Addr { return s.advertise }

// Dial implements raft.StreamLayer: a TCP connection to target's address with the handshake
// done and the hello said to the server target names (targetTransport), within timeout, the
// connect within raftConnectTimeout.
func (s *guardedStream) Dial(target raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr, id := splitTarget(target)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := s.guard.dial(ctx, raft.ServerAddress(addr), timeout)
	if err != nil || s.hello == nil {
		return c, err
	}
	deadline, _ := ctx.Deadline()
	if err := s.hello.dial(c, addr, id, deadline); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("raft connection to %s: hello: %w", addr, err)
	}
	return c, nil
}

// plainGuard is no handshake: raft's connections run over plain TCP, with the hello only.
func plainGuard() streamGuard {
	return streamGuard{
		name:    "raft hello",
		refusal: "raft listener: refused a connection",
		accept:  func(_ context.Context, raw net.Conn) (net.Conn, error) { return raw, nil },
		dial: func(ctx context.Context, addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
			return (&net.Dialer{Timeout: connectTimeout(timeout)}).DialContext(ctx, "tcp", string(addr))
		},
	}
}

// ClusterKey is the proof of the cluster key a node's raft connections give and take when
// the transport runs without TLS; *clusterkey.Key implements it.
type ClusterKey interface {
	// Accept runs the server side of the handshake on conn by deadline.
	Accept(conn net.Conn, deadline time.Time) error
	// Dial runs the client side of the handshake on conn by deadline.
	Dial(conn net.Conn, deadline time.Time) error
}

// keyGuard is the proof of the cluster key, both ways.
func keyGuard(key ClusterKey) streamGuard {
	return streamGuard{
		name:    "cluster key",
		refusal: "raft listener: refused a connection that did not prove the cluster key",
		accept: func(ctx context.Context, raw net.Conn) (net.Conn, error) {
			deadline, _ := ctx.Deadline()
			if err := key.Accept(raw, deadline); err != nil {
				return nil, err
			}
			return raw, nil
		},
		dial: func(ctx context.Context, addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
			c, err := (&net.Dialer{Timeout: connectTimeout(timeout)}).DialContext(ctx, "tcp", string(addr))
			if err != nil {
				return nil, err
			}
			deadline, _ := ctx.Deadline()
			if err := key.Dial(c, deadline); err != nil {
				_ = c.Close()
				return nil, fmt.Errorf("raft connection to %s: %w", addr, err)
			}
			return c, nil
		},
	}
}
