package gateway

import (
	"errors"
	"net/http"
	"testing"

	"github.com/meshgw/meshgw/worker"
)

// A worker's connection pool is made at its first request, not when the pool adds it: a
// gateway importing many workers keeps none for those it never routes to.
func TestUpstreamIsMadeAtFirstUse(t *testing.T) {
	e := newEnv(t, Config{})
	_, w := e.upstream(func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte(`{"ok":true}`)) })
	up := upstreamOf(w)
	if up.hc != nil || up.rpc != nil {
		t.Fatal("the worker has a transport before any request")
	}
	if code, _, body := e.post("/v1/chat/completions", `{"messages":[]}`); code != 200 {
		t.Fatalf("chat %d %s", code, body)
	}
	up.ready() // a no-op now; it orders this read after the request's write for the race detector
	if up.hc == nil || up.rpc != nil {
		t.Fatalf("after a request: hc %v, rpc %v; want an HTTP connection pool", up.hc, up.rpc)
	}
}

// An upstream closed before its first request makes nothing afterwards: a request still
// holding the old snapshot fails as closed, and no connection pool or link is left behind.
func TestUpstreamClosedBeforeUse(t *testing.T) {
	for _, url := range []string{"http://127.0.0.1:9", "grpc://127.0.0.1:9", "tcp://127.0.0.1:9"} {
		e := newEnv(t, Config{})
		w := e.add(worker.Spec{URL: url})
		up := upstreamOf(w)
		if err := e.gw.Pool().Remove(w.ID); err != nil {
			t.Fatal(err)
		}
		up.ready()
		if up.hc != nil || up.rpc == nil {
			t.Fatalf("%s: after Close, ready made hc %v rpc %T", url, up.hc, up.rpc)
		}
		if _, err := up.rpc.open(t.Context(), &rpcRequest{}); !errors.Is(err, errTransportClosed) {
			t.Errorf("%s: a request after Close got %v, want the transport closed", url, err)
		}
	}
}
