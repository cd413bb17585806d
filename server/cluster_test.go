package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/test/testkit"
)

// fakeEngine is an OpenAI-compatible engine that counts the chat completions it answered.
func fakeEngine(chats *atomic.Int64) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/health":
			io.WriteString(w, `{}`)
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		case "/v1/chat/completions":
			chats.Add(1)
			io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
}

// chat sends one chat completion through g, as a client would (no admin key), and returns its
// status.
func (g *testGateway) chat(t *testing.T) int {
	t.Helper()
	resp, err := g.client.Post(g.url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestThreeGatewaysInProcess starts three whole gateways from server.Config in this process,
// the 2nd and 3rd joining the 1st, each with its own state dir. A worker registered through the
// 1st serves chat completions through each of the three; once the 2nd's admin API answers
// its disable, fleet-acknowledged, no gateway routes to it. All three stop, leaving no
// goroutine behind.
func TestThreeGatewaysInProcess(t *testing.T) {
	var chats atomic.Int64
	engine := fakeEngine(&chats)
	defer engine.Close()
	// A durable gateway, whose writes wait as long as a test waits for their acknowledgement
	// (a loaded machine then fails on the answer's lagging list, not on a 503 that came late).
	durable := func(id string, join ...string) func(*Config) {
		return func(c *Config) {
			c.NodeID, c.Raft.Ephemeral, c.StateDir, c.Cluster.Join = id, false, t.TempDir(), join
			c.Cluster.FleetAckTimeout = testkit.Deadline
		}
	}
	g1 := startGateway(t, durable("gw-1"))
	g2 := startGateway(t, durable("gw-2", g1.MeshAddr()))
	g3 := startGateway(t, durable("gw-3", g1.MeshAddr()))
	gws := []*testGateway{g1, g2, g3}

	// Every gateway in the raft configuration first, so that the registration's acknowledgement
	// waits for all three.
	testkit.For(t, "gw-1's raft configuration to list the three gateways", func() bool {
		code, body := g1.do(t, "GET", "/mesh/raft", "")
		return code == 200 && strings.Count(body, `"suffrage"`) == 3
	})
	if code, body := g1.do(t, "POST", "/workers", `{"url":"`+engine.URL+`"}`); code != 201 {
		t.Fatalf("POST /workers through gw-1: %d %s", code, body)
	}
	for _, g := range gws {
		testkit.For(t, g.NodeID()+" to route to the worker", func() bool {
			code, _ := g.do(t, "GET", "/readiness", "")
			return code == 200
		})
		before := chats.Load()
		if code := g.chat(t); code != 200 || chats.Load() != before+1 {
			t.Fatalf("chat through %s: %d, engine answered %d; want 200 from the engine", g.NodeID(), code, chats.Load()-before)
		}
	}

	code, body := g2.do(t, "PUT", "/workers/"+url.QueryEscape(engine.URL), `{"disabled":true,"reason":"in-process test"}`)
	if code != 200 {
		t.Fatalf("PUT /workers through gw-2: %d %s", code, body)
	}
	var answer struct {
		FleetAck *fleetack.Report `json:"fleet_ack"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || answer.FleetAck == nil {
		t.Fatalf("PUT /workers answer %s: no fleet_ack (%v)", body, err)
	}
	if ack := answer.FleetAck; len(ack.Lagging) != 0 || !slices.Equal(sorted(ack.Acked), []string{"gw-1", "gw-2", "gw-3"}) {
		t.Fatalf("fleet_ack %+v, want gw-1, gw-2 and gw-3 acknowledged", ack)
	}
	before := chats.Load()
	for _, g := range gws {
		if code := g.chat(t); code != 503 {
			t.Errorf("chat through %s right after the acknowledged disable: %d, want 503 (no routable worker)", g.NodeID(), code)
		}
	}
	if n := chats.Load() - before; n != 0 {
		t.Errorf("the disabled worker answered %d chats", n)
	}

	var wg sync.WaitGroup
	for _, g := range gws {
		wg.Add(1)
		go func() { defer wg.Done(); g.stop(t) }()
	}
	wg.Wait()
	engine.Close()
	goleak.VerifyNone(t, testkit.Housekeeping()...)
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }
