package consensus

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// TLSConfig runs raft's transport over mutual TLS (--tls-cert, --tls-key, --tls-ca): every
// connection, accepted or dialled, completes a TLS handshake before raft reads or writes a
// byte on it.
type TLSConfig struct {
	// Listen is the configuration of accepted connections; it must require and verify a
	// client certificate (certs.Store.PeerConfig does). Required.
	Listen *tls.Config
	// Dial is the configuration of the connections this node opens; it must present this
	// node's certificate and verify the peer's (certs.Store.DialConfig does). Required.
	Dial *tls.Config
}

// Bounds of the TLS stream layer.
const (
	// tlsHandshakeTimeout bounds one accepted connection's handshake: a client that says
	// nothing is dropped after it.
	tlsHandshakeTimeout = 10 * time.Second
	// tlsMaxHandshakes bounds the handshakes in progress; a connection beyond it is closed at
	// once.
	tlsMaxHandshakes = 64
	// acceptRetry is the pause after an accept error other than a closed listener.
	acceptRetry = 50 * time.Millisecond
)

// tlsStream is raft's stream layer over mutual TLS. Its own loop accepts TCP connections and
// handshakes each in its own goroutine, bounded in time and number, so that a client that
// never completes one holds up neither raft's accept loop nor other peers; Accept hands raft
// only connections whose handshake succeeded. A refused handshake (no certificate, another
// CA, not a node certificate) is logged at WARN with the peer's address (spaced: refusals).
type tlsStream struct {
	raw       net.Listener
	advertise net.Addr
	cfg       TLSConfig
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

// newTLSStream starts accepting on ln; Close stops it.
func newTLSStream(ln net.Listener, advertise net.Addr, cfg TLSConfig, log *slog.Logger) *tlsStream {
	s := &tlsStream{
		raw: ln, advertise: advertise, cfg: cfg, log: log.With("component", "raft-tls"),
		ready: make(chan net.Conn), slots: make(chan struct{}, tlsMaxHandshakes), done: make(chan struct{}),
		pending: make(map[net.Conn]struct{}),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

func (s *tlsStream) acceptLoop() {
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
			s.log.Warn("raft listener: too many TLS handshakes in progress; connection dropped", "remote", c.RemoteAddr().String())
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
func (s *tlsStream) handshake(raw net.Conn) {
	defer s.wg.Done()
	defer func() { <-s.slots }()
	defer s.untrack(raw)
	tc := tls.Server(raw, s.cfg.Listen)
	ctx, cancel := context.WithTimeout(context.Background(), tlsHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		if !s.closed() {
			s.refused.warn(s.log, "raft listener: refused a connection whose TLS handshake failed", "remote", raw.RemoteAddr().String(), "err", err)
		}
		_ = raw.Close()
		return
	}
	select {
	case s.ready <- tc:
	case <-s.done:
		_ = tc.Close()
	}
}

func (s *tlsStream) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed() {
		return false
	}
	s.pending[c] = struct{}{}
	return true
}

func (s *tlsStream) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, c)
}

func (s *tlsStream) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Accept implements net.Listener: the next connection whose handshake succeeded.
func (s *tlsStream) Accept() (net.Conn, error) {
	select {
	case c := <-s.ready:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: it stops accepting, drops the handshakes in progress and
// waits for its goroutines. Calling it again does nothing.
func (s *tlsStream) Close() error {
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
func (s *tlsStream) Addr() net.Addr { return s.advertise }

// Dial implements raft.StreamLayer: a TCP connection to addr with the TLS handshake done, both
// within timeout, the connect within raftConnectTimeout.
func (s *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: connectTimeout(timeout)}, Config: s.cfg.Dial}
	return d.DialContext(ctx, "tcp", string(addr))
}
