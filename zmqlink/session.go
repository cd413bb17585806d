package zmqlink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// session is one DEALER socket and the handshake over it. A lost session is never repaired:
// the link closes the socket and makes a new one (zmq4 reconnects poorly on its own).
type session struct {
	sock zmq4.Socket

	// Guarded by Link.mu.
	ready    bool
	welcome  Welcome
	lastBeat time.Time

	welcomed  chan struct{} // closed at WELCOME
	dead      chan struct{} // closed by kill
	reason    error         // why the session ended; written once, before dead closes
	killOnce  sync.Once
	readerEnd chan struct{}
}

// kill ends the session; the first reason wins.
func (s *session) kill(err error) {
	s.killOnce.Do(func() {
		s.reason = err
		close(s.dead)
	})
}

func (s *session) send(m message) error { return s.sock.Send(newMsg(nil, m)) }

// connect makes a socket and dials the engine, bounded by the dial and handshake timeouts.
func (l *Link) connect() (*session, error) {
	sock := zmq4.NewDealer(context.Background(),
		zmq4.WithDialerMaxRetries(0),
		zmq4.WithDialerTimeout(l.cfg.dialTimeout),
		zmq4.WithTimeout(l.cfg.handshakeTimeout),
		zmq4.WithLogger(slog.NewLogLogger(l.cfg.log.Handler(), slog.LevelDebug)),
	)
	errc := make(chan error, 1)
	goSafe(l.cfg.log, "zmqlink dial", func() {
		err := errors.New("zmqlink: dial panicked")
		defer func() { errc <- err }()
		err = sock.Dial(l.dial)
	})
	t := time.NewTimer(l.cfg.dialTimeout + l.cfg.handshakeTimeout)
	defer t.Stop()
	var err error
	select {
	case err = <-errc:
		if err == nil {
			return &session{sock: sock, welcomed: make(chan struct{}), dead: make(chan struct{}),
				readerEnd: make(chan struct{})}, nil
		}
		sock.Close()
		return nil, err
	case <-t.C:
		err = fmt.Errorf("zmqlink: connecting to %s timed out", l.url)
	case <-l.closed:
		err = ErrClosed
	}
	sock.Close() // ends a dial stuck in the ZMTP handshake (see closingTransport)
	<-errc
	return nil, err
}

// serve runs one session until it dies or the link closes, then tears it down. It reports
// whether the session became ready.
func (l *Link) serve(s *session) (wasReady bool) {
	goSafe(l.cfg.log, "zmqlink reader", func() { l.read(s) })
	l.mu.Lock()
	l.sess = s
	l.mu.Unlock()
	if err := s.send(message{typ: typeHello, meta: metaJSON(hello{Protocol: ProtocolVersion, Gateway: l.nodeID})}); err != nil {
		s.kill(fmt.Errorf("zmqlink: sending HELLO: %w", err))
	}
	handshake := time.NewTimer(l.cfg.handshakeTimeout)
	defer handshake.Stop()
	var beat <-chan time.Time
	welcomed := s.welcomed
loop:
	for {
		select {
		case <-s.dead:
			break loop
		case <-l.closed:
			_ = s.send(message{typ: typeGoodbye})
			s.kill(ErrClosed)
		case <-handshake.C:
			s.kill(fmt.Errorf("zmqlink: no WELCOME within %v", l.cfg.handshakeTimeout))
		case <-welcomed:
			welcomed = nil
			handshake.Stop()
			l.mu.Lock()
			interval := heartbeatInterval(s.welcome)
			l.mu.Unlock()
			ticker := time.NewTicker(interval)
			defer ticker.Stop()
			beat = ticker.C
		case <-beat:
			if err := s.send(message{typ: typeHeartbeat}); err != nil {
				s.kill(fmt.Errorf("zmqlink: sending HEARTBEAT: %w", err))
			}
		}
	}
	s.sock.Close()
	<-s.readerEnd
	l.mu.Lock()
	wasReady = s.ready
	s.ready = false
	l.sess = nil
	l.mu.Unlock()
	l.failStreams(s, fmt.Errorf("%w: %v", ErrLinkLost, s.reason))
	if wasReady && !errors.Is(s.reason, ErrClosed) {
		l.cfg.log.Warn("zmqlink: session lost", "url", l.url, "reason", s.reason)
	}
	return wasReady
}

// read receives until the socket fails or closes; it never blocks on a consumer, so that
// zmq4's small receive queue keeps draining.
func (l *Link) read(s *session) {
	defer close(s.readerEnd)
	for {
		msg, err := s.sock.Recv()
		if err != nil {
			s.kill(fmt.Errorf("zmqlink: receiving: %w", err))
			return
		}
		m, err := parseMessage(msg.Frames)
		if err != nil {
			l.cfg.log.Debug("zmqlink: dropping a message", "url", l.url, "err", err)
			continue
		}
		l.handle(s, m)
	}
}

func (l *Link) handle(s *session, m message) {
	switch m.typ {
	case typeWelcome:
		l.onWelcome(s, m)
	case typeHeartbeat:
		l.onHeartbeat(s, m)
	case typeChunk, typeEnd, typeError:
		if m.id == 0 && m.typ == typeError {
			s.kill(decodeEngineError(m.meta))
			return
		}
		l.mu.Lock()
		st := l.streams[m.id]
		l.mu.Unlock()
		if st != nil {
			st.deliver(m)
		}
	case typeGoodbye:
		s.kill(errors.New("zmqlink: the engine said GOODBYE"))
	default:
		l.cfg.log.Debug("zmqlink: ignoring a message", "url", l.url, "type", m.typ)
	}
}

func (l *Link) onWelcome(s *session, m message) {
	var w Welcome
	if err := json.Unmarshal(m.meta, &w); err != nil {
		s.kill(fmt.Errorf("zmqlink: bad WELCOME: %w", err))
		return
	}
	l.mu.Lock()
	if s.ready {
		l.mu.Unlock()
		return
	}
	s.ready, s.welcome, s.lastBeat = true, w, l.cfg.now()
	l.welcome = w
	l.lastErr = nil
	l.mu.Unlock()
	close(s.welcomed)
	l.cfg.log.Info("zmqlink: session ready", "url", l.url, "engine", w.EngineID, "session", w.Session)
}

func (l *Link) onHeartbeat(s *session, m message) {
	var hb heartbeat
	if err := json.Unmarshal(m.meta, &hb); err != nil {
		l.cfg.log.Debug("zmqlink: bad HEARTBEAT", "url", l.url, "err", err)
		return
	}
	now := l.cfg.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !s.ready:
	case hb.Session != s.welcome.Session:
		s.kill(fmt.Errorf("zmqlink: engine session changed from %q to %q (engine restarted)", s.welcome.Session, hb.Session))
	default:
		s.lastBeat = now
	}
}
