package owned

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/test/fakeengine"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
	"github.com/meshgw/meshgw/zmqlink"
)

// These tests ask real engines on loopback with the default listers, on real time.

// linkTransport stands in for the data plane's transport of a ZMQ worker: a zmqlink.Link with
// its local check and the models of its WELCOME.
type linkTransport struct{ l *zmqlink.Link }

func (x linkTransport) Close()                          { _ = x.l.Close() }
func (x linkTransport) Check(ctx context.Context) error { return x.l.Check(ctx) }
func (x linkTransport) AnnouncedModels() ([]string, error) {
	info := x.l.Info()
	if info.Session == "" {
		return nil, zmqlink.ErrNotReady
	}
	return info.Models, nil
}

// A worker registered by URL only gets the models its engine serves discovered, over HTTP
// (GET /v1/models), gRPC (Engine.Models) and ZMQ (the WELCOME).
func TestDiscoveryFromFakeEngine(t *testing.T) {
	for _, mode := range []string{"http", "grpc", "zmq"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			const model = "engine-model-7b"
			e := fakeengine.New(fakeengine.Config{Model: model, Logger: slog.New(slog.DiscardHandler)})
			t.Cleanup(func() { e.Close() })
			var url string
			var err error
			switch mode {
			case "http":
				url, err = e.Start("127.0.0.1:0")
			case "grpc":
				url, err = e.StartGRPC("127.0.0.1:0")
			case "zmq":
				url, err = e.StartZMQ("tcp://127.0.0.1:0", fakeengine.ZMQOptions{HeartbeatInterval: 50 * time.Millisecond})
			}
			if err != nil {
				t.Fatal(err)
			}
			l := newLiveWith(t, pool.Config{NewTransport: func(w *pool.Worker) pool.Transport {
				if w.Spec().ConnectionMode != worker.ModeZMQ {
					return nil
				}
				link, err := zmqlink.Dial(w.URL, "gw-live", zmqlink.WithLogger(slog.New(slog.DiscardHandler)))
				if err != nil {
					t.Errorf("dial %s: %v", w.URL, err)
					return nil
				}
				return linkTransport{link}
			}})
			id := l.own(worker.Spec{URL: url})
			t.Cleanup(func() { _ = l.pool.Remove(id) }) // closes the link
			l.waitHealth(id, health.Ready, 5*time.Second)
			testkit.Within(t, 5*time.Second, "models discovered", func() bool { return len(l.pool.Get(id).DiscoveredModels()) > 0 })
			if got := l.pool.Get(id).ListedModels(); !slices.Equal(got, []string{model}) {
				t.Errorf("listed models %q, want %q", got, model)
			}
			// The models are set in the pool before the line is logged: wait for the line.
			announced := func() int { return len(l.logs.Lines("worker models discovered", model)) }
			testkit.Within(t, 5*time.Second, "the discovery logged", func() bool { return announced() > 0 })
			if announced() != 1 {
				t.Errorf("want one line announcing the discovery:\n%s", l.logs.String())
			}
		})
	}
}

// HTTP discovery sends the worker's key and this gateway's id; a refused discovery leaves the
// worker ready, is logged at DEBUG without the key, and declared models are never asked for.
func TestHTTPDiscoveryHeadersAndRefusal(t *testing.T) {
	t.Parallel()
	const key = "sk-models-secret-91c2"
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			return // /health passes
		}
		mu.Lock()
		asked = append(asked, r.Host+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Mesh-Gateway"))
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	declared := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			t.Errorf("a worker with declared models was asked for them")
		}
	}))
	t.Cleanup(declared.Close)
	l := newLive(t)
	id := l.own(worker.Spec{URL: srv.URL, APIKey: key})
	did := l.own(worker.Spec{URL: declared.URL, Models: []string{"declared"}})
	l.waitHealth(id, health.Ready, 5*time.Second)
	l.waitHealth(did, health.Ready, 5*time.Second)
	testkit.Within(t, 5*time.Second, "the refused discovery logged", func() bool {
		return len(l.logs.Lines("level=DEBUG", "model discovery failed", "401")) == 1
	})
	mu.Lock()
	got := slices.Clone(asked)
	mu.Unlock()
	host := strings.TrimPrefix(srv.URL, "http://")
	if want := []string{host + " Bearer " + key + " gw-live"}; !slices.Equal(got, want) {
		t.Errorf("discovery sent %q, want %q", got, want)
	}
	if m := l.pool.Get(id).DiscoveredModels(); m != nil {
		t.Errorf("discovered %q from a refusal", m)
	}
	if strings.Contains(l.logs.String(), key) {
		t.Errorf("the API key reached the logs:\n%s", l.logs.String())
	}
	if got := l.pool.Get(did).ListedModels(); !slices.Equal(got, []string{"declared"}) {
		t.Errorf("declared worker lists %q", got)
	}
}
