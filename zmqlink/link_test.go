package zmqlink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/test/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// fakeClock is a settable clock for heartbeat freshness.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// engine is a test engine: a Server whose health can be switched and whose HELLOs are counted.
type engine struct {
	*Server
	healthy *atomic.Bool
	hellos  *atomic.Int64
}

func startEngine(t *testing.T, endpoint string, cfg ServerConfig) *engine {
	t.Helper()
	e := &engine{healthy: new(atomic.Bool), hellos: new(atomic.Int64)}
	e.healthy.Store(true)
	cfg.Healthy = e.healthy.Load
	cfg.OnHello = func(string) { e.hellos.Add(1) }
	cfg.Logger = quiet
	if cfg.EngineID == "" {
		cfg.EngineID = "engine-1"
	}
	if cfg.Handler == nil {
		cfg.Handler = echoHandler
	}
	srv, err := Listen(endpoint, cfg)
	if err != nil {
		t.Fatalf("Listen %s: %v", endpoint, err)
	}
	e.Server = srv
	t.Cleanup(func() { srv.Close() })
	return e
}

// echoHandler answers with a first chunk naming the gateway and route, then the body in
// one chunk per byte.
var echoHandler = HandlerFunc(func(ctx context.Context, req *ServerRequest, w *ChunkWriter) error {
	head := fmt.Sprintf("%s %s stream=%v id=%s", req.Gateway, req.Route, req.Stream, req.RequestID)
	if err := w.Send(Chunk{Status: 200, ContentType: "text/plain", Data: []byte(head)}); err != nil {
		return err
	}
	for i := range req.Body {
		if err := w.Send(Chunk{Data: req.Body[i : i+1]}); err != nil {
			return err
		}
	}
	return nil
})

func dial(t *testing.T, endpoint string, opts ...Option) *Link {
	t.Helper()
	opts = append([]Option{WithLogger(quiet), WithBackoff(time.Millisecond, 20*time.Millisecond)}, opts...)
	l, err := Dial(endpoint, "gw-1", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func waitReady(t *testing.T, l *Link) {
	t.Helper()
	testkit.For(t, "the link to be ready", func() bool { return l.Check(context.Background()) == nil })
}

// endpoints are the transports every scenario runs over.
func endpoints(t *testing.T) map[string]string {
	return map[string]string{
		"tcp": "tcp://127.0.0.1:0",
		"ipc": "ipc://" + filepath.Join(t.TempDir(), "engine.sock"),
	}
}

func TestHandshakeThenReady(t *testing.T) {
	for name, ep := range endpoints(t) {
		t.Run(name, func(t *testing.T) {
			e := startEngine(t, ep, ServerConfig{Models: []string{"m"}, MaxConcurrentRequests: 7, MaxContextLength: 4096, HeartbeatInterval: 20 * time.Millisecond})
			e.healthy.Store(false) // HELLO is refused: the link must stay pending
			l := dial(t, e.Endpoint())
			testkit.For(t, "a refused HELLO", func() bool { return e.hellos.Load() == 0 && refusedOnce(l) })
			if err := l.Check(context.Background()); !errors.Is(err, ErrNotReady) {
				t.Fatalf("Check while refused: %v, want ErrNotReady", err)
			}
			if _, err := l.Do(context.Background(), Request{Route: "/x"}); !errors.Is(err, ErrNotReady) {
				t.Fatalf("Do while pending: %v, want ErrNotReady", err)
			}
			e.healthy.Store(true)
			waitReady(t, l)
			want := Welcome{Protocol: 1, EngineID: "engine-1", Session: e.Session(), Models: []string{"m"},
				MaxConcurrentRequests: 7, MaxContextLength: 4096, HeartbeatIntervalMS: 20}
			if got := l.Info(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("Info() = %+v, want %+v", got, want)
			}
		})
	}
}

// refusedOnce reports whether the link's last attempt was refused by the engine.
func refusedOnce(l *Link) bool {
	var ee *EngineError
	err := l.Check(context.Background())
	return errors.Is(err, ErrNotReady) && errors.As(err, &ee) && ee.Code == CodeUnavailable
}

func TestStaleHeartbeatsRecreateTheSession(t *testing.T) {
	// An hour between heartbeats: none arrives during the test, so the fake clock alone decides.
	e := startEngine(t, "tcp://127.0.0.1:0", ServerConfig{HeartbeatInterval: time.Hour})
	clock := &fakeClock{now: time.Unix(1000, 0)}
	l := dial(t, e.Endpoint(), WithClock(clock.Now))
	waitReady(t, l)
	clock.Advance(3 * time.Hour) // exactly the limit: still fresh
	if err := l.Check(context.Background()); err != nil {
		t.Fatalf("Check at the limit: %v", err)
	}
	clock.Advance(time.Millisecond)
	if err := l.Check(context.Background()); !errors.Is(err, ErrStale) {
		t.Fatalf("Check past the limit: %v, want ErrStale", err)
	}
	waitReady(t, l) // a new socket, a new HELLO, a new WELCOME stamped with the clock
	if n := e.hellos.Load(); n != 2 {
		t.Errorf("%d HELLOs, want 2 (the first session and its replacement)", n)
	}
}

func TestStoppedHeartbeatsGoStale(t *testing.T) {
	e := startEngine(t, "tcp://127.0.0.1:0", ServerConfig{HeartbeatInterval: 10 * time.Millisecond})
	l := dial(t, e.Endpoint())
	waitReady(t, l)
	e.healthy.Store(false) // as health_status 503 does in the fake worker
	testkit.For(t, "Check to see stale heartbeats", func() bool {
		return errors.Is(l.Check(context.Background()), ErrStale)
	})
	testkit.For(t, "the new HELLO to be refused", func() bool {
		return errors.Is(l.Check(context.Background()), ErrNotReady)
	})
	e.healthy.Store(true)
	waitReady(t, l)
}

func TestEngineRestartedOnTheSameAddressIsRejoined(t *testing.T) {
	for name, ep := range endpoints(t) {
		t.Run(name, func(t *testing.T) {
			cfg := ServerConfig{HeartbeatInterval: 10 * time.Millisecond}
			first := startEngine(t, ep, cfg)
			addr := first.Endpoint()
			l := dial(t, addr)
			waitReady(t, l)
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			testkit.For(t, "the link to notice", func() bool { return l.Check(context.Background()) != nil })
			second := startEngine(t, addr, cfg)
			testkit.For(t, "the link to rejoin", func() bool {
				return l.Check(context.Background()) == nil && l.Info().Session == second.Session()
			})
			if first.Session() == second.Session() {
				t.Error("a restarted engine kept its session nonce")
			}
			st, err := l.Do(context.Background(), Request{Route: "/r", Body: []byte("ok")})
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, st); got != "gw-1 /r stream=false id=|ok" {
				t.Errorf("answer after the restart: %q", got)
			}
		})
	}
}

// readAll reads a stream to its END: the first chunk, "|", then the rest.
func readAll(t *testing.T, st *Stream) string {
	t.Helper()
	var out string
	for i := 0; ; i++ {
		c, err := st.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v (after %q)", err, out)
		}
		out += string(c.Data)
		if i == 0 {
			out += "|"
		}
	}
}

func TestLinkCloseEndsStreams(t *testing.T) {
	block := make(chan struct{})
	e := startEngine(t, "tcp://127.0.0.1:0", ServerConfig{Handler: HandlerFunc(
		func(ctx context.Context, _ *ServerRequest, _ *ChunkWriter) error {
			select {
			case <-ctx.Done():
			case <-block:
			}
			return nil
		})})
	defer close(block)
	l, err := Dial(e.Endpoint(), "gw-1", WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, l)
	st, err := l.Do(context.Background(), Request{Route: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := st.Next(); !errors.Is(err, ErrLinkLost) && !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v, want ErrLinkLost or ErrClosed", err)
	}
	if err := l.Check(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Check after Close: %v, want ErrClosed", err)
	}
}

func TestDialRejectsBadURLs(t *testing.T) {
	for _, url := range []string{"", "http://127.0.0.1:1", "tcp://", "tcp://nohost", "ipc://", "127.0.0.1:5555"} {
		if l, err := Dial(url, "gw"); err == nil {
			l.Close()
			t.Errorf("Dial(%q) succeeded", url)
		}
	}
}

// TestHelloCountedBeforeTheWelcome: a session is counted (OnHello) before its gateway is
// answered, so a gateway whose link is ready finds its HELLO in the engine's counts. The count
// came after the WELCOME, and test/fakeengine's TestZMQFaults once read one HELLO of two.
func TestHelloCountedBeforeTheWelcome(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	released := false
	free := func() {
		if !released {
			released = true
			close(release)
		}
	}
	defer free()
	var hellos atomic.Int64
	srv, err := Listen("tcp://127.0.0.1:0", ServerConfig{EngineID: "engine-1", Handler: echoHandler, Logger: quiet,
		HeartbeatInterval: 20 * time.Millisecond, OnHello: func(string) {
			close(entered)
			<-release
			hellos.Add(1)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	l := dial(t, srv.Endpoint())
	<-entered
	// While the HELLO is being counted, the gateway must not have its session: with the
	// WELCOME sent first, the link is ready within milliseconds.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline); <-tick.C {
		if l.Check(context.Background()) == nil {
			t.Fatal("the link is ready while the engine has not counted its HELLO")
		}
	}
	free()
	waitReady(t, l)
	if n := hellos.Load(); n != 1 {
		t.Errorf("%d HELLOs counted when the link was ready, want 1", n)
	}
}
