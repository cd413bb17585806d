package zmqlink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// Errors of the gateway side. Check and Do wrap them with the detail.
var (
	// ErrNotReady: no session is open yet (dialing, or HELLO not answered).
	ErrNotReady = errors.New("zmqlink: handshake not done")
	// ErrStale: the engine's heartbeats stopped; Check has started a new session.
	ErrStale = errors.New("zmqlink: engine heartbeats stale")
	// ErrLinkLost: the session ended while the request was in flight.
	ErrLinkLost = errors.New("zmqlink: link to the engine lost")
	// ErrClosed: the link or the server is closed.
	ErrClosed = errors.New("zmqlink: closed")
)

// Defaults of a Link's options.
const (
	DefaultHeartbeatInterval = 500 * time.Millisecond
	DefaultStaleBeats        = 3
	DefaultHandshakeTimeout  = 3 * time.Second
	DefaultDialTimeout       = 2 * time.Second
	DefaultMinBackoff        = 50 * time.Millisecond
	DefaultMaxBackoff        = 2 * time.Second
)

// Option configures a Link.
type Option func(*linkConfig)

type linkConfig struct {
	now              func() time.Time
	log              *slog.Logger
	staleBeats       int
	handshakeTimeout time.Duration
	dialTimeout      time.Duration
	minBackoff       time.Duration
	maxBackoff       time.Duration
}

// WithClock sets the clock that stamps heartbeats and judges their freshness in Check (nil:
// time.Now). Timers (handshake timeout, backoff) run on real time.
func WithClock(now func() time.Time) Option { return func(c *linkConfig) { c.now = now } }

// WithLogger sets the logger of session changes (slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *linkConfig) { c.log = l } }

// WithStaleBeats sets after how many heartbeat intervals without a heartbeat Check calls the
// engine stale (3).
func WithStaleBeats(n int) Option { return func(c *linkConfig) { c.staleBeats = n } }

// WithHandshakeTimeout bounds the wait for WELCOME after HELLO (3 s) and, added to the dial
// timeout, the ZMTP connection setup.
func WithHandshakeTimeout(d time.Duration) Option {
	return func(c *linkConfig) { c.handshakeTimeout = d }
}

// WithDialTimeout bounds one TCP or unix-socket connect (2 s).
func WithDialTimeout(d time.Duration) Option { return func(c *linkConfig) { c.dialTimeout = d } }

// WithBackoff sets the wait between failed connection attempts, doubling from min to max
// (50 ms, 2 s).
func WithBackoff(min, max time.Duration) Option {
	return func(c *linkConfig) { c.minBackoff, c.maxBackoff = min, max }
}

// Link is a gateway's connection to one ZMQ engine: a DEALER socket, recreated whenever the
// session is lost, over which requests are multiplexed by id. It is safe for concurrent use.
type Link struct {
	url    string
	dial   string
	nodeID string
	cfg    linkConfig

	mu      sync.Mutex
	sess    *session // the current socket; nil between attempts
	lastErr error    // why the last session or attempt ended
	welcome Welcome  // the last WELCOME received
	streams map[uint64]*Stream
	nextID  uint64

	closed    chan struct{}
	done      chan struct{} // the manager goroutine has exited
	closeOnce sync.Once
}

// Dial returns a link to the engine at url (tcp://HOST:PORT or ipc:///PATH) for the gateway
// nodeID. It does not block: the link connects, says HELLO and reconnects in the background;
// Check tells when it is ready. The error is for a malformed url only.
func Dial(url, nodeID string, opts ...Option) (*Link, error) {
	dial, err := parseEndpoint(url)
	if err != nil {
		return nil, err
	}
	cfg := linkConfig{
		now: time.Now, log: slog.Default(), staleBeats: DefaultStaleBeats,
		handshakeTimeout: DefaultHandshakeTimeout, dialTimeout: DefaultDialTimeout,
		minBackoff: DefaultMinBackoff, maxBackoff: DefaultMaxBackoff,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.log == nil {
		cfg.log = slog.Default()
	}
	l := &Link{
		url: url, dial: dial, nodeID: nodeID, cfg: cfg,
		streams: make(map[uint64]*Stream),
		closed:  make(chan struct{}),
		done:    make(chan struct{}),
	}
	goSafe(cfg.log, "zmqlink manager", l.run)
	return l, nil
}

// URL is the engine endpoint the link was dialed with.
func (l *Link) URL() string { return l.url }

// Info returns the last WELCOME the engine sent (the zero Welcome before the first).
func (l *Link) Info() Welcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.welcome
}

// Check is the health probe of a ZMQ worker, and sends nothing to the engine. It returns nil
// when the handshake is done and the last heartbeat is fresher than the stale limit (3
// intervals). When the heartbeats are stale it closes the socket, so that the link recreates it
// and says HELLO again (an engine restarted on the same address is rejoined this way), and
// returns an error wrapping ErrStale. While no session is open it returns an error wrapping
// ErrNotReady with the last failure.
func (l *Link) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-l.closed:
		return ErrClosed
	default:
	}
	now := l.cfg.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sess
	if s == nil || !s.ready {
		if l.lastErr != nil {
			return fmt.Errorf("%w: %w", ErrNotReady, l.lastErr)
		}
		return ErrNotReady
	}
	if age, limit := now.Sub(s.lastBeat), l.staleLimit(s.welcome); age > limit {
		err := fmt.Errorf("%w: last heartbeat %v ago (limit %v)", ErrStale, age.Round(time.Millisecond), limit)
		s.kill(err)
		return err
	}
	return nil
}

func (l *Link) staleLimit(w Welcome) time.Duration {
	return time.Duration(l.cfg.staleBeats) * heartbeatInterval(w)
}

func heartbeatInterval(w Welcome) time.Duration {
	if w.HeartbeatIntervalMS <= 0 {
		return DefaultHeartbeatInterval
	}
	return time.Duration(w.HeartbeatIntervalMS) * time.Millisecond
}

// Close ends the session (saying GOODBYE) and fails every open stream with ErrClosed.
func (l *Link) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	<-l.done
	return nil
}

// run is the manager: it opens a session, waits for it to end, and opens the next, backing off
// while attempts fail, until Close.
func (l *Link) run() {
	defer close(l.done)
	defer l.failStreams(nil, ErrClosed)
	backoff := l.cfg.minBackoff
	for {
		s, err := l.connect()
		if err == nil {
			if l.serve(s) {
				backoff = l.cfg.minBackoff
			}
			err = s.reason
		}
		if l.isClosed() {
			return
		}
		l.mu.Lock()
		l.lastErr = err
		l.mu.Unlock()
		l.cfg.log.Debug("zmqlink: session attempt ended", "url", l.url, "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-l.closed:
			t.Stop()
			return
		}
		backoff = min(2*backoff, l.cfg.maxBackoff)
	}
}

func (l *Link) isClosed() bool {
	select {
	case <-l.closed:
		return true
	default:
		return false
	}
}

// failStreams ends the streams of session s (nil: all) with err.
func (l *Link) failStreams(s *session, err error) {
	l.mu.Lock()
	var failed []*Stream
	for id, st := range l.streams {
		if s == nil || st.sess == s {
			failed = append(failed, st)
			delete(l.streams, id)
		}
	}
	l.mu.Unlock()
	for _, st := range failed {
		st.finish(err)
	}
}

// goSafe runs f in a goroutine that logs a panic with its stack instead of crashing.
func goSafe(log *slog.Logger, what string, f func()) {
	go func() {
		defer func() {
			if r := recover(); r != nil {
				log.Error("zmqlink: goroutine panicked", "goroutine", what, "panic", r, "stack", string(debug.Stack()))
			}
		}()
		f()
	}()
}
