package zmqlink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// Handler answers one request on the engine side. It sends the answer with w; returning nil
// sends END, returning an error sends ERROR (with the code and status of an *EngineError, else
// CodeEngine). When ctx ends (CANCEL, the gateway's session expired, the server closed) nothing
// more is sent.
type Handler interface {
	ServeZMQ(ctx context.Context, req *ServerRequest, w *ChunkWriter) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *ServerRequest, w *ChunkWriter) error

// ServeZMQ calls f.
func (f HandlerFunc) ServeZMQ(ctx context.Context, req *ServerRequest, w *ChunkWriter) error {
	return f(ctx, req, w)
}

// ServerRequest is a request as the engine receives it.
type ServerRequest struct {
	Request
	// Gateway is the node id the sending gateway gave in HELLO.
	Gateway string
}

// ServerConfig configures the engine side. Handler is required.
type ServerConfig struct {
	// EngineID names the engine in WELCOME (the bound endpoint).
	EngineID string
	// Models are announced in WELCOME.
	Models []string
	// MaxConcurrentRequests is announced in WELCOME and enforced: requests beyond it get ERROR
	// overloaded, status 429 (256).
	MaxConcurrentRequests int
	// MaxContextLength is announced in WELCOME (0: not said).
	MaxContextLength int
	// HeartbeatInterval is how often HEARTBEAT goes to each gateway (500 ms). A gateway session
	// that sends nothing for 5 intervals is dropped and its requests cancelled.
	HeartbeatInterval time.Duration
	// Handler answers requests.
	Handler Handler
	// Healthy gates the engine: while it returns false no HEARTBEAT is sent and HELLO is
	// answered with ERROR unavailable (nil: always healthy).
	Healthy func() bool
	// OnHello is called for each session opened, with the gateway's node id, before the
	// gateway is answered (nil: nothing).
	OnHello func(gateway string)
	// Logger receives session changes (slog.Default()).
	Logger *slog.Logger
}

// Server is the engine side of the protocol: a ROUTER socket serving many gateway sessions.
type Server struct {
	cfg      ServerConfig
	log      *slog.Logger
	sock     zmq4.Socket
	endpoint string
	session  string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once

	mu       sync.Mutex
	peers    map[string]*peer // by ZMQ identity
	inflight int
}

// peer is one gateway session.
type peer struct {
	identity []byte
	gateway  string
	lastSeen time.Time
	reqs     map[uint64]context.CancelFunc
}

// Listen binds a ROUTER socket on endpoint (tcp://HOST:PORT, port 0 picks one, or
// ipc:///PATH; a stale socket file left by a killed engine is removed) and serves until Close.
func Listen(endpoint string, cfg ServerConfig) (*Server, error) {
	bound, err := parseEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	if cfg.Handler == nil {
		return nil, errors.New("zmqlink: ServerConfig.Handler is nil")
	}
	if cfg.MaxConcurrentRequests <= 0 {
		cfg.MaxConcurrentRequests = 256
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if path, ok := strings.CutPrefix(endpoint, "ipc://"); ok {
		removeStaleSocket(path) // Go's unix listener removes its own file at Close
	}
	ctx, cancel := context.WithCancel(context.Background())
	sock := zmq4.NewRouter(ctx, zmq4.WithLogger(slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug)))
	if err := sock.Listen(bound); err != nil {
		cancel()
		sock.Close()
		if cause := errors.Unwrap(err); cause != nil {
			err = cause
		}
		return nil, fmt.Errorf("zmqlink: listening on %s: %w", endpoint, err)
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, sock: sock, endpoint: endpoint, session: newNonce(),
		ctx: ctx, cancel: cancel, peers: make(map[string]*peer),
	}
	if strings.HasPrefix(endpoint, "tcp://") && sock.Addr() != nil {
		s.endpoint = "tcp://" + sock.Addr().String()
	}
	if s.cfg.EngineID == "" {
		s.cfg.EngineID = s.endpoint
	}
	s.wg.Add(2)
	goSafe(s.log, "zmqlink server receiver", func() { defer s.wg.Done(); s.receive() })
	goSafe(s.log, "zmqlink server heartbeats", func() { defer s.wg.Done(); s.heartbeats() })
	return s, nil
}

// Endpoint is the bound endpoint, with the port picked when it was 0.
func (s *Server) Endpoint() string { return s.endpoint }

// Session is the nonce of this server's life, sent in WELCOME and every HEARTBEAT.
func (s *Server) Session() string { return s.session }

// Close cancels every request, closes the socket (dropping every gateway's connection) and
// waits for the handlers to return.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.cancel()
		err = s.sock.Close()
		s.wg.Wait()
		if errors.Is(err, net.ErrClosed) { // a connection the peer had already closed
			err = nil
		}
	})
	return err
}

func newNonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) send(identity []byte, m message) {
	if err := s.sock.Send(newMsg(identity, m)); err != nil && s.ctx.Err() == nil {
		s.log.Debug("zmqlink: sending", "type", m.typ, "err", err)
	}
}

func (s *Server) sendError(identity []byte, id uint64, code, msg string, status int) {
	s.send(identity, message{typ: typeError, id: id, meta: metaJSON(errorMeta{Code: code, Message: msg, Status: status})})
}

// receive dispatches messages until the socket closes; it never waits on a handler.
func (s *Server) receive() {
	for {
		msg, err := s.sock.Recv()
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("zmqlink: server receive failed", "endpoint", s.endpoint, "err", err)
			}
			return
		}
		if len(msg.Frames) < 1 {
			continue
		}
		m, err := parseMessage(msg.Frames[1:])
		if err != nil {
			s.log.Debug("zmqlink: dropping a message", "err", err)
			continue
		}
		s.dispatch(msg.Frames[0], m)
	}
}

func (s *Server) dispatch(identity []byte, m message) {
	switch m.typ {
	case typeHello:
		s.onHello(identity, m)
	case typeHeartbeat:
		if !s.touch(identity) {
			s.sendError(identity, 0, CodeNoSession, "no session: send HELLO", 0)
		}
	case typeRequest:
		s.onRequest(identity, m)
	case typeCancel:
		s.mu.Lock()
		if p := s.peers[string(identity)]; p != nil {
			p.lastSeen = time.Now()
			if cancel := p.reqs[m.id]; cancel != nil {
				cancel()
			}
		}
		s.mu.Unlock()
	case typeGoodbye:
		s.mu.Lock()
		s.dropLocked(string(identity))
		s.mu.Unlock()
	default:
		s.log.Debug("zmqlink: ignoring a message", "type", m.typ)
	}
}

// touch marks a peer alive; it reports whether the peer has a session.
func (s *Server) touch(identity []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.peers[string(identity)]
	if p != nil {
		p.lastSeen = time.Now()
	}
	return p != nil
}

func (s *Server) onHello(identity []byte, m message) {
	var h hello
	if err := json.Unmarshal(m.meta, &h); err != nil || h.Protocol != ProtocolVersion {
		s.sendError(identity, 0, CodeProtocol, fmt.Sprintf("this engine speaks protocol %d", ProtocolVersion), 0)
		return
	}
	if s.cfg.Healthy != nil && !s.cfg.Healthy() {
		s.sendError(identity, 0, CodeUnavailable, "engine unavailable", 503)
		return
	}
	s.mu.Lock()
	s.dropLocked(string(identity))
	s.peers[string(identity)] = &peer{
		identity: identity, gateway: h.Gateway, lastSeen: time.Now(), reqs: make(map[uint64]context.CancelFunc),
	}
	s.mu.Unlock()
	w := Welcome{
		Protocol: ProtocolVersion, EngineID: s.cfg.EngineID, Session: s.session, Models: s.cfg.Models,
		MaxConcurrentRequests: s.cfg.MaxConcurrentRequests, MaxContextLength: s.cfg.MaxContextLength,
		HeartbeatIntervalMS: int(s.cfg.HeartbeatInterval / time.Millisecond),
	}
	// Counted before the WELCOME goes out: a gateway that sees its session open finds it counted.
	if s.cfg.OnHello != nil {
		s.cfg.OnHello(h.Gateway)
	}
	s.send(identity, message{typ: typeWelcome, meta: metaJSON(w)})
	s.log.Debug("zmqlink: session opened", "gateway", h.Gateway)
}

// dropLocked forgets a session and cancels its requests.
func (s *Server) dropLocked(key string) {
	p := s.peers[key]
	if p == nil {
		return
	}
	delete(s.peers, key)
	for _, cancel := range p.reqs {
		cancel()
	}
}

func (s *Server) onRequest(identity []byte, m message) {
	var meta requestMeta
	if err := json.Unmarshal(m.meta, &meta); err != nil {
		s.sendError(identity, m.id, CodeBadRequest, "undecodable REQUEST meta: "+err.Error(), 400)
		return
	}
	s.mu.Lock()
	p := s.peers[string(identity)]
	switch {
	case p == nil:
		s.mu.Unlock()
		s.sendError(identity, m.id, CodeNoSession, "no session: send HELLO", 0)
		return
	case s.inflight >= s.cfg.MaxConcurrentRequests:
		s.mu.Unlock()
		s.sendError(identity, m.id, CodeOverloaded, fmt.Sprintf("engine at max_concurrent_requests (%d)", s.cfg.MaxConcurrentRequests), 429)
		return
	}
	p.lastSeen = time.Now()
	ctx, cancel := context.WithCancel(s.ctx)
	p.reqs[m.id] = cancel
	s.inflight++
	s.wg.Add(1)
	s.mu.Unlock()
	req := &ServerRequest{
		Request: Request{Route: meta.Route, Body: m.payload, Stream: meta.Stream, RequestID: meta.RequestID},
		Gateway: p.gateway,
	}
	goSafe(s.log, "zmqlink handler", func() {
		defer s.wg.Done()
		s.run(ctx, p, m.id, req)
	})
}

// run calls the handler for one request and ends the answer with END or ERROR.
func (s *Server) run(ctx context.Context, p *peer, id uint64, req *ServerRequest) {
	defer func() {
		s.mu.Lock()
		if cancel := p.reqs[id]; cancel != nil {
			cancel()
			delete(p.reqs, id)
		}
		s.inflight--
		s.mu.Unlock()
	}()
	w := &ChunkWriter{s: s, ctx: ctx, identity: p.identity, id: id}
	err := s.cfg.Handler.ServeZMQ(ctx, req, w)
	switch {
	case ctx.Err() != nil:
	case err == nil:
		s.send(p.identity, message{typ: typeEnd, id: id})
	default:
		ee := &EngineError{Code: CodeEngine, Message: err.Error()}
		errors.As(err, &ee)
		s.sendError(p.identity, id, ee.Code, ee.Message, ee.Status)
	}
}

// heartbeats sends HEARTBEAT to every session each interval while healthy, and drops sessions
// silent for 5 intervals.
func (s *Server) heartbeats() {
	t := time.NewTicker(s.cfg.HeartbeatInterval)
	defer t.Stop()
	beat := metaJSON(heartbeat{Session: s.session})
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		healthy := s.cfg.Healthy == nil || s.cfg.Healthy()
		var to [][]byte
		s.mu.Lock()
		for key, p := range s.peers {
			if time.Since(p.lastSeen) > 5*s.cfg.HeartbeatInterval {
				s.log.Debug("zmqlink: session expired", "gateway", p.gateway)
				s.dropLocked(key)
			} else if healthy {
				to = append(to, p.identity)
			}
		}
		s.mu.Unlock()
		for _, id := range to {
			s.send(id, message{typ: typeHeartbeat, meta: beat})
		}
	}
}

// ChunkWriter sends the chunks of one answer.
type ChunkWriter struct {
	s        *Server
	ctx      context.Context
	identity []byte
	id       uint64
}

// Send sends one chunk; its Status and ContentType travel only when set (the first chunk). It
// fails once the request's context has ended.
func (w *ChunkWriter) Send(c Chunk) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	var meta []byte
	if c.Status != 0 || c.ContentType != "" {
		meta = metaJSON(chunkMeta{Status: c.Status, ContentType: c.ContentType})
	}
	return w.s.sock.Send(newMsg(w.identity, message{typ: typeChunk, id: w.id, meta: meta, payload: c.Data}))
}
