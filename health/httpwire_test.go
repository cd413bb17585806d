package health

import (
	"net"
	"testing"
	"time"
)

func TestParseEngineURL(t *testing.T) {
	tests := []struct {
		url              string
		ok               bool
		addr, host, path string
		tls              bool
	}{
		{"http://127.0.0.1:8000", true, "127.0.0.1:8000", "127.0.0.1:8000", "", false},
		{"https://engine.local", true, "engine.local:443", "engine.local", "", true},
		{"HTTP://engine.local", true, "engine.local:80", "engine.local", "", false},
		{"http://[::1]", true, "[::1]:80", "[::1]", "", false},
		{"http://[::1]:9000/v1", true, "[::1]:9000", "[::1]:9000", "/v1", false},
		{"grpc://127.0.0.1:8000", false, "", "", "", false},
		{"http://user:pw@127.0.0.1:8000", false, "", "", "", false},
		{"http://", false, "", "", "", false},
		{"http://h:1?x=1", false, "", "", "", false},
		{"127.0.0.1:8000", false, "", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			u, ok := parseEngineURL(tc.url)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok && (u.key.addr != tc.addr || u.host != tc.host || u.path != tc.path || u.key.tls != tc.tls) {
				t.Errorf("got addr %q host %q path %q tls %v", u.key.addr, u.host, u.path, u.key.tls)
			}
		})
	}
}

func TestStatusLine(t *testing.T) {
	tests := []struct {
		in   string
		code int
		ok   bool
	}{
		{"HTTP/1.1 503 Service Unavailable\r\nX: y", 503, true},
		{"HTTP/1.0 200 OK\nX: y", 200, true},
		{"HTTP/1.1 204\r\n", 204, true},
		{"HTTP/1.1 20 OK\r\n", 0, false},
		{"HTTP/1.1 2000 OK\r\n", 0, false},
		{"HTTP/2 200 OK\r\n", 0, false},
		{"HTTP/1.1 099 x\r\n", 0, false},
		{"HTTP/1.1 200 OK", 0, false}, // the line never ends
		{"garbage\r\n", 0, false},
	}
	for _, tc := range tests {
		code, ok := statusLine([]byte(tc.in))
		if code != tc.code || ok != tc.ok {
			t.Errorf("statusLine(%q) = %d, %v; want %d, %v", tc.in, code, ok, tc.code, tc.ok)
		}
	}
}

// closeConn is a connection of the pool's tests: it only records Close.
type closeConn struct {
	net.Conn
	closed bool
}

func (c *closeConn) Close() error {
	c.closed = true
	return nil
}

func TestEnginePoolBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newEnginePool(nil)
	p.now = func() time.Time { return now }
	p.maxIdle = 3
	defer p.closeIdle()
	a, b := engineAddr{addr: "a:1"}, engineAddr{addr: "b:1"}
	conn := func() (*engineConn, *closeConn) {
		cc := &closeConn{}
		return &engineConn{Conn: cc}, cc
	}
	a1, a1c := conn()
	a2, _ := conn()
	a3, _ := conn()
	p.put(a, a1)
	p.put(a, a2)
	p.put(a, a3) // a holds 2: its oldest goes
	if all, to := p.idleCount(a); !a1c.closed || all != 2 || to != 2 {
		t.Fatalf("after 3 puts to a: oldest closed %v, idle %d/%d; want true, 2/2", a1c.closed, all, to)
	}
	b1, _ := conn()
	b2, b2c := conn()
	p.put(b, b1)
	p.put(b, b2) // 3 in all: the pool is full
	if all, to := p.idleCount(b); !b2c.closed || all != 3 || to != 1 {
		t.Fatalf("full pool: new one closed %v, idle %d (b: %d); want true, 3 (1)", b2c.closed, all, to)
	}
	if got := p.get(a); got != a3 {
		t.Errorf("get(a) = %p, want the newest %p", got, a3)
	}
	if got := p.get(engineAddr{addr: "a:1", tls: true}); got != nil {
		t.Errorf("get of the https address returned a plain connection")
	}
}

func TestEnginePoolExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newEnginePool(nil)
	p.now = func() time.Time { return now }
	defer p.closeIdle()
	a, b := engineAddr{addr: "a:1"}, engineAddr{addr: "b:1"}
	ac, bc := &closeConn{}, &closeConn{}
	p.put(a, &engineConn{Conn: ac})
	now = now.Add(50 * time.Second)
	p.put(b, &engineConn{Conn: bc})
	now = now.Add(40 * time.Second) // a idle 90 s, b 40 s
	if got := p.get(a); got != nil {
		t.Fatal("get returned a connection idle for the whole idle timeout")
	}
	p.expire(now)
	if all, _ := p.idleCount(a); !ac.closed || bc.closed || all != 1 {
		t.Fatalf("after 90 s: a closed %v, b closed %v, %d idle; want true, false, 1", ac.closed, bc.closed, all)
	}
	now = now.Add(50 * time.Second)
	p.expire(now)
	p.mu.Lock()
	left, sweeping := len(p.idle), p.sweep != nil
	p.mu.Unlock()
	if !bc.closed || left != 0 || sweeping {
		t.Errorf("after b's 90 s: b closed %v, %d addresses, sweep armed %v; want true, 0, false", bc.closed, left, sweeping)
	}
}
