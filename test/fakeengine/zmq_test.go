package fakeengine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/zmqlink"
)

// zmqHarness is one engine in ZMQ mode, a link to it from gateway "gw-z", and an HTTP harness
// on its control port.
type zmqHarness struct {
	*harness
	link *zmqlink.Link
}

func newZMQHarness(t *testing.T, endpoint string) *zmqHarness {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	e := New(Config{NodeName: "node-z", Logger: quiet})
	url, err := e.StartZMQ(endpoint, ZMQOptions{HeartbeatInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	control, err := e.StartControl("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	link, err := zmqlink.Dial(url, "gw-z", zmqlink.WithLogger(quiet), zmqlink.WithBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, e: e, url: control, client: newClient(t)}
	t.Cleanup(func() {
		link.Close()
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	testkit.For(t, "the link to be ready", func() bool { return link.Check(context.Background()) == nil })
	return &zmqHarness{harness: h, link: link}
}

// collect reads a stream to its end; err is nil at END.
func collect(t *testing.T, l *zmqlink.Link, req zmqlink.Request) ([]zmqlink.Chunk, error) {
	t.Helper()
	st, err := l.Do(context.Background(), req)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	var chunks []zmqlink.Chunk
	for {
		c, err := st.Next()
		if errors.Is(err, io.EOF) {
			return chunks, nil
		}
		if err != nil {
			return chunks, err
		}
		chunks = append(chunks, c)
	}
}

func TestZMQAnswersLikeHTTP(t *testing.T) {
	endpoints := map[string]string{"tcp": "tcp://127.0.0.1:0", "ipc": "ipc://" + filepath.Join(t.TempDir(), "e.sock")}
	for name, ep := range endpoints {
		t.Run(name, func(t *testing.T) {
			z := newZMQHarness(t, ep)
			want := AnswerText("node-z", "hi")
			if info := z.link.Info(); !cmp.Equal(info.Models, []string{"fake-model"}) || info.MaxContextLength != MaxContextLength {
				t.Errorf("WELCOME %+v", info)
			}
			chunks, err := collect(t, z.link, zmqlink.Request{Route: RouteChat, Body: []byte(chatBody)})
			if err != nil || len(chunks) != 1 || chunks[0].Status != 200 || chunks[0].ContentType != contentJSON {
				t.Fatalf("non-streamed: %+v %v", chunks, err)
			}
			if got := textOf(t, RouteChat, false, chunks[0].Data); got != want {
				t.Errorf("text %q, want %q", got, want)
			}
			chunks, err = collect(t, z.link, zmqlink.Request{Route: RouteChat, Body: []byte(chatBody), Stream: true})
			if err != nil || len(chunks) != 21 || chunks[0].ContentType != contentSSE || string(chunks[20].Data) != "[DONE]" {
				t.Fatalf("streamed: %d chunks, %v", len(chunks), err)
			}
			var got string
			for _, c := range chunks[:20] {
				got += textOf(t, RouteChat, true, c.Data)
			}
			if got != want {
				t.Errorf("streamed text %q, want %q", got, want)
			}
			want2 := map[string]GatewayStats{"gw-z": {Requests: 2, Probes: 1}}
			if diff := cmp.Diff(want2, z.e.Stats().ByGateway); diff != "" {
				t.Errorf("stats by gateway (-want +got):\n%s", diff)
			}
		})
	}
}

func TestZMQFaults(t *testing.T) {
	z := newZMQHarness(t, "tcp://127.0.0.1:0")
	req := zmqlink.Request{Route: RouteChat, Body: []byte(chatBody), Stream: true}
	t.Run("error status", func(t *testing.T) {
		z.fault(`{"error_status":503}`)
		chunks, err := collect(t, z.link, req)
		var env struct{ Error struct{ Code int } }
		if err != nil || len(chunks) != 1 || chunks[0].Status != 503 || json.Unmarshal(chunks[0].Data, &env) != nil || env.Error.Code != 503 {
			t.Errorf("got %+v, %v; want one 503 chunk with an envelope, then END", chunks, err)
		}
	})
	t.Run("cut", func(t *testing.T) {
		z.fault(`{"error_status":0,"cut_stream_after":4}`)
		chunks, err := collect(t, z.link, req)
		var ee *zmqlink.EngineError
		if len(chunks) != 4 || !errors.As(err, &ee) || ee.Code != zmqlink.CodeEngine {
			t.Errorf("got %d chunks, %v; want 4 then ERROR engine_error", len(chunks), err)
		}
	})
	t.Run("hang until cancelled", func(t *testing.T) {
		z.fault(`{"cut_stream_after":0,"hang":true}`)
		ctx, cancel := context.WithCancel(context.Background())
		st, err := z.link.Do(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		testkit.For(t, "the request to hang", func() bool { return z.e.hanging.Load() == 1 })
		cancel()
		if _, err := st.Next(); !errors.Is(err, context.Canceled) {
			t.Errorf("Next: %v, want context.Canceled", err)
		}
		testkit.For(t, "the engine to drop the request", func() bool { return z.e.hanging.Load() == 0 })
	})
	t.Run("unhealthy stops heartbeats and refuses sessions", func(t *testing.T) {
		z.fault(`{"hang":false,"health_status":503}`)
		testkit.For(t, "stale heartbeats", func() bool { return errors.Is(z.link.Check(context.Background()), zmqlink.ErrStale) })
		testkit.For(t, "a refused HELLO", func() bool {
			var ee *zmqlink.EngineError
			return errors.As(z.link.Check(context.Background()), &ee) && ee.Code == zmqlink.CodeUnavailable
		})
		z.fault(`{}`)
		testkit.For(t, "the link to rejoin", func() bool { return z.link.Check(context.Background()) == nil })
		if p := z.e.Stats().ByGateway["gw-z"].Probes; p != 2 {
			t.Errorf("%d HELLOs counted, want 2", p)
		}
	})
}
