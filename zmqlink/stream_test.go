package zmqlink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/go-zeromq/zmq4"

	"github.com/meshgw/meshgw/test/testkit"
)

func TestRequestStreamedEndToEnd(t *testing.T) {
	e := startEngine(t, "tcp://127.0.0.1:0", ServerConfig{})
	l := dial(t, e.Endpoint())
	waitReady(t, l)
	st, err := l.Do(context.Background(), Request{Route: "/v1/chat/completions", Body: []byte("abc"), Stream: true, RequestID: "r-1"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Next()
	if err != nil || first.Status != 200 || first.ContentType != "text/plain" || string(first.Data) != "gw-1 /v1/chat/completions stream=true id=r-1" {
		t.Fatalf("first chunk %+v (%s), %v", first, first.Data, err)
	}
	for _, want := range []string{"a", "b", "c"} {
		c, err := st.Next()
		if err != nil || string(c.Data) != want || c.Status != 0 || c.ContentType != "" {
			t.Fatalf("chunk %+v, %v; want data %q and no status", c, err, want)
		}
	}
	for range 2 { // END is sticky
		if _, err := st.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("after the last chunk: %v, want io.EOF", err)
		}
	}
}

func TestConcurrentRequestsAreMultiplexed(t *testing.T) {
	e := startEngine(t, "ipc://"+t.TempDir()+"/e.sock", ServerConfig{})
	l := dial(t, e.Endpoint())
	waitReady(t, l)
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf("request-%02d", i)
			st, err := l.Do(context.Background(), Request{Route: "/r", Body: []byte(body)})
			if err != nil {
				errs <- err
				return
			}
			var got bytes.Buffer
			for j := 0; ; j++ {
				c, err := st.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					errs <- err
					return
				}
				if j > 0 {
					got.Write(c.Data)
				}
			}
			if got.String() != body {
				errs <- fmt.Errorf("request %d got %q", i, got.String())
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestFailedAnswers(t *testing.T) {
	cut := HandlerFunc(func(ctx context.Context, req *ServerRequest, w *ChunkWriter) error {
		_ = w.Send(Chunk{Status: 200, ContentType: "text/event-stream", Data: []byte("one")})
		_ = w.Send(Chunk{Data: []byte("two")})
		return &EngineError{Code: "cut", Message: "stream cut", Status: 502}
	})
	plain := HandlerFunc(func(context.Context, *ServerRequest, *ChunkWriter) error {
		return errors.New("boom")
	})
	tests := []struct {
		name    string
		handler Handler
		chunks  int
		want    EngineError
	}{
		{"cut mid-stream", cut, 2, EngineError{Code: "cut", Message: "stream cut", Status: 502}},
		{"plain error", plain, 0, EngineError{Code: CodeEngine, Message: "boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := startEngine(t, "tcp://127.0.0.1:0", ServerConfig{Handler: tt.handler})
			l := dial(t, e.Endpoint())
			waitReady(t, l)
			st, err := l.Do(context.Background(), Request{Route: "/r"})
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.chunks {
				if _, err := st.Next(); err != nil {
					t.Fatalf("chunk %d: %v", i, err)
				}
			}
			_, err = st.Next()
			var ee *EngineError
			if !errors.As(err, &ee) || *ee != tt.want {
				t.Errorf("Next: %v, want %+v", err, tt.want)
			}
		})
	}
}

// blockingEngine's handler sends one chunk, reports its request, and waits for cancellation.
func blockingEngine(t *testing.T, max int) (*engine, chan *ServerRequest, chan error) {
	started := make(chan *ServerRequest, 16)
	ended := make(chan error, 16)
	e := startEngine(t, "tcp://127.0.0.1:0", ServerConfig{MaxConcurrentRequests: max, Handler: HandlerFunc(
		func(ctx context.Context, req *ServerRequest, w *ChunkWriter) error {
			_ = w.Send(Chunk{Status: 200, Data: []byte("first")})
			started <- req
			<-ctx.Done()
			ended <- ctx.Err()
			return nil
		})})
	return e, started, ended
}

func TestCancelReachesTheEngine(t *testing.T) {
	e, started, ended := blockingEngine(t, 0)
	l := dial(t, e.Endpoint())
	waitReady(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := l.Do(ctx, Request{Route: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if c, err := st.Next(); err != nil || string(c.Data) != "first" {
		t.Fatalf("first chunk: %q %v", c.Data, err)
	}
	cancel()
	if _, err := st.Next(); !errors.Is(err, context.Canceled) {
		t.Errorf("Next after cancel: %v, want context.Canceled", err)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Errorf("engine handler ended with %v", err)
	}
	t.Run("stream close", func(t *testing.T) {
		st, err := l.Do(context.Background(), Request{Route: "/r"})
		if err != nil {
			t.Fatal(err)
		}
		<-started
		st.Close()
		if err := <-ended; !errors.Is(err, context.Canceled) {
			t.Errorf("engine handler ended with %v", err)
		}
		if _, err := st.Next(); !errors.Is(err, ErrStreamClosed) {
			t.Errorf("Next after Close: %v", err)
		}
	})
}

func TestOverloadedEngineRefuses(t *testing.T) {
	e, started, _ := blockingEngine(t, 1)
	l := dial(t, e.Endpoint())
	waitReady(t, l)
	first, err := l.Do(context.Background(), Request{Route: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	<-started
	second, err := l.Do(context.Background(), Request{Route: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = second.Next()
	var ee *EngineError
	if !errors.As(err, &ee) || ee.Code != CodeOverloaded || ee.Status != 429 {
		t.Errorf("second request: %v, want overloaded 429", err)
	}
}

func TestEngineLossFailsStreamsInFlight(t *testing.T) {
	e, started, _ := blockingEngine(t, 0)
	l := dial(t, e.Endpoint())
	waitReady(t, l)
	st, err := l.Do(context.Background(), Request{Route: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	e.Close()
	if _, err := st.Next(); err != nil {
		t.Fatalf("the chunk sent before the loss: %v", err)
	}
	if _, err := st.Next(); !errors.Is(err, ErrLinkLost) {
		t.Errorf("Next after the engine closed: %v, want ErrLinkLost", err)
	}
}

// TestSessionChangeIsARestart drives the link with a hand-made ROUTER that changes its session
// nonce, and sends junk the link must ignore.
func TestSessionChangeIsARestart(t *testing.T) {
	router := zmq4.NewRouter(context.Background(), zmq4.WithLogger(nil))
	defer router.Close()
	ep := "ipc://" + t.TempDir() + "/raw.sock"
	if err := router.Listen(ep); err != nil {
		t.Fatal(err)
	}
	l := dial(t, ep)
	welcome := func(id []byte, session string) {
		w := metaJSON(Welcome{Protocol: 1, Session: session, HeartbeatIntervalMS: 3600000})
		if err := router.Send(newMsg(id, message{typ: typeWelcome, meta: w})); err != nil {
			t.Fatal(err)
		}
	}
	hello := func() []byte {
		for {
			msg, err := router.Recv()
			if err != nil {
				t.Fatal(err)
			}
			m, err := parseMessage(msg.Frames[1:])
			if err != nil {
				t.Fatal(err)
			}
			if m.typ == typeHello {
				var h hello
				if err := json.Unmarshal(m.meta, &h); err != nil || h.Gateway != "gw-1" || h.Protocol != 1 {
					t.Fatalf("HELLO %s: %v", m.meta, err)
				}
				return msg.Frames[0]
			}
		}
	}
	id := hello()
	welcome(id, "s1")
	waitReady(t, l)
	_ = router.Send(zmq4.NewMsgFrom(id, []byte("junk")))                                      // malformed: ignored
	_ = router.Send(newMsg(id, message{typ: typeHeartbeat, meta: metaJSON(heartbeat{"s1"})})) // same session: fine
	_ = router.Send(newMsg(id, message{typ: typeHeartbeat, meta: metaJSON(heartbeat{"s2"})})) // restarted
	id2 := hello()
	if bytes.Equal(id, id2) {
		t.Error("the new session reused the old socket identity")
	}
	welcome(id2, "s2")
	testkit.For(t, "the second session", func() bool {
		return l.Check(context.Background()) == nil && l.Info().Session == "s2"
	})
}

func TestParseMessage(t *testing.T) {
	good := message{typ: typeChunk, id: 1 << 40, meta: []byte(`{"status":200}`), payload: []byte("data")}
	got, err := parseMessage(good.frames())
	if err != nil || got.typ != good.typ || got.id != good.id || string(got.meta) != string(good.meta) || string(got.payload) != "data" {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	bad := good.frames()
	bad[0] = append([]byte(nil), bad[0]...)
	bad[0][2] = 2
	tests := []struct {
		name   string
		frames [][]byte
	}{
		{"two frames", good.frames()[:2]},
		{"short header", [][]byte{[]byte("MG"), nil, nil}},
		{"bad magic", [][]byte{[]byte("XXXXXXXXXXXX"), nil, nil}},
		{"other version", bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseMessage(tt.frames); !errors.Is(err, errBadMessage) {
				t.Errorf("got %v, want errBadMessage", err)
			}
		})
	}
	if s := typeGoodbye.String(); s != "GOODBYE" {
		t.Errorf("String() = %q", s)
	}
}
