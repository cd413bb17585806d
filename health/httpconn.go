package health

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"sync"
	"time"
)

// enginePool keeps the idle keep-alive connections of HTTPProber: at most perHost per engine
// address, maxIdle in all, each closed once idle for idleTimeout. An idle connection is a bare
// net.Conn: no goroutine watches it (net/http keeps two per connection), so a connection that
// the engine closed meanwhile is noticed when a probe reuses it, and that probe is retried once
// on a new connection. A connection that saw any error, or whose probe's context ended, is
// closed rather than pooled.
type enginePool struct {
	dialer      net.Dialer
	tls         *tls.Config // shared part of every TLS dial; ServerName is set per dial
	perHost     int
	maxIdle     int
	idleTimeout time.Duration
	now         func() time.Time

	mu    sync.Mutex
	idle  map[engineAddr][]*engineConn // per address, oldest first; kept while empty between sweeps
	count int                          // idle connections in all
	sweep *time.Timer                  // runs expire while idle holds an address
}

// engineAddr is a pool key: where a connection goes and whether it speaks TLS.
type engineAddr struct {
	addr string // host:port
	tls  bool
}

// engineConn is one connection of the pool.
type engineConn struct {
	net.Conn
	deadline bool      // a deadline is set on the connection
	since    time.Time // when it went idle
}

// abort closes a connection whose exchange failed (a timeout, a cancelled probe, a broken
// answer) with a reset: the kernel drops what the engine has not acknowledged. A plain close
// would leave the kernel retransmitting the probe for minutes over a link that holds it, and
// it could reach the engine long after it was given up, once another gateway owns the worker
// (docs/chaos.md, finding 18).
func (c *engineConn) abort() {
	conn := c.Conn
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = c.Close()
}

// sharedEnginePool is the pool of every HTTPProber that does not name its own.
var sharedEnginePool = sync.OnceValue(func() *enginePool { return newEnginePool(nil) })

// newEnginePool returns a pool with the default bounds; TLS is verified against roots, nil
// meaning the system roots.
func newEnginePool(roots *x509.CertPool) *enginePool {
	cfg := &tls.Config{
		RootCAs:            roots,
		NextProtos:         []string{"http/1.1"},
		ClientSessionCache: tls.NewLRUClientSessionCache(1024),
	}
	return &enginePool{
		dialer:      net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		tls:         cfg,
		perHost:     2,
		maxIdle:     4096,
		idleTimeout: 90 * time.Second,
		now:         time.Now,
		idle:        make(map[engineAddr][]*engineConn),
	}
}

// probe sends one probe to the engine at t.URL + path and returns the answer's status code.
func (p *enginePool) probe(ctx context.Context, t Target, path string) (int, error) {
	u, ok := parseEngineURL(t.URL)
	if !ok {
		return 0, &ProbeError{Reason: "bad url"}
	}
	if err := ctx.Err(); err != nil {
		return 0, transportError(ctx, err)
	}
	x := acquireExchange()
	defer releaseExchange(x)
	x.writeRequest(u, t, path)
	for retried := false; ; retried = true {
		var c *engineConn
		if !retried {
			c = p.get(u.key)
		}
		reused := c != nil
		if c == nil {
			var err error
			if c, err = p.dial(ctx, u.key); err != nil {
				return 0, transportError(ctx, err)
			}
		}
		code, keep, err := x.roundTrip(ctx, c)
		switch {
		case err == nil && keep:
			p.put(u.key, c)
		case err == nil:
			c.Close()
		default:
			c.abort()
		}
		var none *noAnswerError
		switch {
		case err == nil:
			return code, nil
		case reused && errors.As(err, &none) && ctx.Err() == nil:
			continue // the engine closed the idle connection: try a new one
		}
		return 0, transportError(ctx, err)
	}
}

// dial opens a connection to a, with the TLS handshake done for https.
func (p *enginePool) dial(ctx context.Context, a engineAddr) (*engineConn, error) {
	c, err := p.dialer.DialContext(ctx, "tcp", a.addr)
	if err != nil {
		return nil, err
	}
	if a.tls {
		cfg := p.tls.Clone()
		cfg.ServerName = hostOf(a.addr)
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	return &engineConn{Conn: c}, nil
}

// get returns the newest idle connection to a that has not expired, or nil.
func (p *enginePool) get(a engineAddr) *engineConn {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.idle[a]
	n := len(list)
	if n == 0 || now.Sub(list[n-1].since) >= p.idleTimeout {
		return nil // expired ones are left to the sweep
	}
	c := list[n-1]
	list[n-1] = nil
	p.idle[a] = list[:n-1]
	p.count--
	return c
}

// put keeps c for the next probe of a. When a already has perHost idle connections its oldest
// is closed; when the pool is full c is.
func (p *enginePool) put(a engineAddr, c *engineConn) {
	c.since = p.now()
	var drop *engineConn
	p.mu.Lock()
	list := p.idle[a]
	switch {
	case len(list) >= p.perHost:
		drop = list[0]
		copy(list, list[1:])
		list[len(list)-1] = c
	case p.count >= p.maxIdle:
		drop = c
	default:
		list = append(list, c)
		p.count++
	}
	p.idle[a] = list
	if p.sweep == nil {
		p.sweep = time.AfterFunc(p.idleTimeout, p.expireNow)
	}
	p.mu.Unlock()
	if drop != nil {
		drop.Close()
	}
}

func (p *enginePool) expireNow() { p.expire(p.now()) }

// expire closes the connections idle for idleTimeout at now, forgets addresses left without
// one, and schedules the next sweep while any address remains.
func (p *enginePool) expire(now time.Time) {
	var drop []*engineConn
	p.mu.Lock()
	next := p.idleTimeout
	for a, list := range p.idle {
		keep := list[:0]
		for _, c := range list {
			if age := now.Sub(c.since); age < p.idleTimeout {
				keep = append(keep, c)
				next = min(next, p.idleTimeout-age)
			} else {
				drop = append(drop, c)
			}
		}
		clear(list[len(keep):])
		p.count -= len(list) - len(keep)
		if len(keep) == 0 {
			delete(p.idle, a)
		} else {
			p.idle[a] = keep
		}
	}
	if p.sweep != nil {
		if len(p.idle) > 0 {
			p.sweep.Reset(max(next, time.Second))
		} else {
			p.sweep.Stop()
			p.sweep = nil
		}
	}
	p.mu.Unlock()
	for _, c := range drop {
		c.Close()
	}
}

// closeIdle closes every idle connection.
func (p *enginePool) closeIdle() {
	var drop []*engineConn
	p.mu.Lock()
	for a, list := range p.idle {
		drop = append(drop, list...)
		delete(p.idle, a)
	}
	p.count = 0
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
	p.mu.Unlock()
	for _, c := range drop {
		c.Close()
	}
}

// idleCount returns how many connections are idle, in all and to a.
func (p *enginePool) idleCount(a engineAddr) (all, to int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count, len(p.idle[a])
}

// engineURL is an engine's base URL taken apart for a probe.
type engineURL struct {
	key  engineAddr
	host string // the Host header: the URL's authority as written
	path string // base path before the endpoint; "" for a canonical engine URL
}

// parseEngineURL takes an http or https base URL apart without allocating for a canonical
// engine URL (scheme://host:port). ok is false for another scheme, user info or no host.
func parseEngineURL(raw string) (u engineURL, ok bool) {
	scheme, rest, found := strings.Cut(raw, "://")
	switch {
	case !found:
		return u, false
	case strings.EqualFold(scheme, "http"):
	case strings.EqualFold(scheme, "https"):
		u.key.tls = true
	default:
		return u, false
	}
	u.host = rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		u.host, u.path = rest[:i], rest[i:]
		if rest[i] != '/' {
			return u, false
		}
	}
	if u.host == "" || strings.Contains(u.host, "@") {
		return u, false
	}
	u.key.addr = u.host
	if i := strings.LastIndexByte(u.host, ':'); i < 0 || i < strings.LastIndexByte(u.host, ']') {
		if u.key.tls {
			u.key.addr += ":443"
		} else {
			u.key.addr += ":80"
		}
	}
	return u, true
}

// hostOf is the host of a host:port address, without the brackets of an IPv6 literal.
func hostOf(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
