package gateway

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/pool"
)

// hangingUpstream starts a worker that accepts requests and never answers them, until the
// client goes away or the test ends, and registers it; it counts the requests in n.
func (e *testEnv) hangingUpstream(n *atomic.Int32) *pool.Worker {
	done := make(chan struct{})
	_, w := e.upstream(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})
	e.t.Cleanup(func() { close(done) }) // before the server's Close, which waits for its handlers
	return w
}

// TestHungWorkerHeldAndRetried: a request to a worker that accepts it and never answers is
// retried on another worker once the request timeout passes (nothing reached the client), and
// the gateway sends that worker nothing more: every later request goes to the other worker at
// once, whatever the round robin's turn. The outcome reported for the hung worker is a timeout
// (breaker.NoResponseInTime), and the hold is counted.
func TestHungWorkerHeldAndRetried(t *testing.T) {
	const timeout = 300 * time.Millisecond
	e := newEnv(t, Config{Policy: "round_robin", RequestTimeout: timeout})
	var hung, ok atomic.Int32
	hw := e.hangingUpstream(&hung)
	_, gw := e.upstream(func(w http.ResponseWriter, r *http.Request) {
		ok.Add(1)
		okHandler("good")(w, r)
	})
	for i := range 6 {
		start := time.Now()
		status, hdr, body := e.post("/v1/chat/completions", `{"model":"m"}`)
		if status != 200 || hdr.Get("X-Mesh-Worker") != string(gw.ID) {
			t.Fatalf("request %d: %d from %q, want 200 from the answering worker: %s", i, status, hdr.Get("X-Mesh-Worker"), body)
		}
		took := time.Since(start)
		switch hdr.Get("X-Mesh-Route-Attempt") {
		case "2": // the request the hung worker did not answer, retried
			if took < timeout {
				t.Errorf("request %d: retried after %v, before the request timeout", i, took)
			}
		case "1":
			if took >= timeout {
				t.Errorf("request %d took %v: it waited on the hung worker", i, took)
			}
		default:
			t.Errorf("request %d: attempt %q", i, hdr.Get("X-Mesh-Route-Attempt"))
		}
	}
	if n := hung.Load(); n != 1 {
		t.Errorf("the hung worker got %d requests, want 1: the first, and none after its timeout", n)
	}
	if w := e.gw.Pool().Get(hw.ID); w.Gates()&pool.GateHung == 0 {
		t.Errorf("the hung worker's gates are %b, want GateHung", w.Gates())
	}
	var timedOut int
	for _, o := range e.outcomesCopy() {
		if o.worker == hw.ID && o.connErr && o.status == breaker.NoResponseInTime {
			timedOut++
		}
	}
	if timedOut != 1 {
		t.Errorf("%d timeouts reported for the hung worker, want 1: %+v", timedOut, e.outcomesCopy())
	}
	if n := counterValue(t, e, "meshgw_worker_hung_holds_total", map[string]string{"worker": hw.URL}); n != 1 {
		t.Errorf("meshgw_worker_hung_holds_total = %v, want 1", n)
	}
}

// TestSecondTimeoutAnswers504: a request retried after a timeout that times out again on the
// next worker is answered 504 naming that worker: two timeouts bound a request's wait. Both
// workers are held.
func TestSecondTimeoutAnswers504(t *testing.T) {
	e := newEnv(t, Config{Policy: "round_robin", RequestTimeout: 200 * time.Millisecond})
	var n atomic.Int32
	a, b, c := e.hangingUpstream(&n), e.hangingUpstream(&n), e.hangingUpstream(&n)
	status, hdr, _ := e.post("/v1/chat/completions", `{"model":"m"}`)
	if status != http.StatusGatewayTimeout || hdr.Get("X-Mesh-Route-Attempt") != "2" {
		t.Fatalf("%d at attempt %q, want 504 at attempt 2", status, hdr.Get("X-Mesh-Route-Attempt"))
	}
	if got := n.Load(); got != 2 {
		t.Errorf("%d workers tried, want 2", got)
	}
	held := 0
	for _, w := range []*pool.Worker{a, b, c} {
		if e.gw.Pool().Get(w.ID).Gates()&pool.GateHung != 0 {
			held++
		}
	}
	if held != 2 {
		t.Errorf("%d workers held, want the 2 tried", held)
	}
}
