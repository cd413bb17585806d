package admin

import (
	"context"
	"strings"
	"testing"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/weights"
	"github.com/meshgw/meshgw/ownership"
)

// noLeader is the ownership moves and weight updates of a gateway whose raft has no leader.
type noLeader struct{}

func (noLeader) Transfer(context.Context, fsm.Record, string) (ownership.Outcome, error) {
	return ownership.Outcome{}, consensus.ErrNoLeader
}
func (noLeader) Rebalance(context.Context, bool) (ownership.Outcome, error) {
	return ownership.Outcome{}, consensus.ErrNoLeader
}
func (noLeader) Update(context.Context, []byte, weights.Target) (weights.Report, error) {
	return weights.Report{}, consensus.ErrNoLeader
}

// TestWritesOnAGatewayThatLeft: a gateway drained out of the mesh never has a raft leader
// again, so every write, and every read through the leader, answers 409 drained (not the 503
// no_leader a client would retry) saying so, and nothing is written. Reads of its own state
// still answer.
func TestWritesOnAGatewayThatLeft(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.register(t, `{"url":"http://127.0.0.1:8001"}`)
	one := "/workers/" + rec.ID
	left := false
	h := e.handler(func(c *Config) {
		// What a gateway that left sees: raft has no leader, and never will.
		c.Writer = failing{consensus.ErrNoLeader}
		c.Fleet = &fakeFleet{barrierErr: consensus.ErrNoLeader}
		c.Ownership, c.Drainer, c.Drains, c.Weights, c.Journal = noLeader{}, &fakeDrain{}, &fakeDrain{}, noLeader{}, journalOf{}
		c.Left = func() bool { return left }
	})
	writes := []req{
		{method: "POST", uri: "/workers", body: `{"url":"http://127.0.0.1:8002"}`},
		{method: "PUT", uri: one, body: `{"disabled":true}`},
		{method: "PATCH", uri: one, body: `{"priority":1}`},
		{method: "DELETE", uri: one},
		{method: "PUT", uri: "/workers/w-000000000000", body: `{"disabled":true}`},
		{method: "POST", uri: one + "/transfer", body: `{"to":"n2"}`},
		{method: "POST", uri: "/mesh/rebalance"},
		{method: "POST", uri: "/mesh/drain", body: `{"peer":"n2"}`},
		{method: "POST", uri: "/update_weights_from_disk", body: `{"model_path":"/m"}`},
		{method: "POST", uri: "/weight_update_journal/resolve", body: `{"acknowledge":true}`},
		{method: "GET", uri: "/workers?consistent=true"},
		{method: "GET", uri: one + "?consistent=true"},
	}
	for _, r := range writes {
		if a := do(h, r); a.status != 503 || a.errCode() != "no_leader" {
			t.Fatalf("before leaving, %s %s: %d %s; want 503 no_leader", r.method, r.uri, a.status, a.body)
		}
	}
	left = true
	for _, r := range writes {
		t.Run(r.method+" "+r.uri, func(t *testing.T) {
			a := do(h, r)
			if a.status != 409 || a.errCode() != "drained" || !strings.Contains(a.message(), "this gateway was drained and has left the mesh") {
				t.Errorf("%d %s; want 409 drained", a.status, a.body)
			}
			if a.header.Peek("Retry-After") != nil {
				t.Error("a refusal that no retry here can change carries Retry-After")
			}
		})
	}
	for _, uri := range []string{"/workers", one, "/mesh/owners", "/mesh/peers"} {
		if a := do(h, req{method: "GET", uri: uri}); a.status != 200 {
			t.Errorf("GET %s on a gateway that left: %d %s", uri, a.status, a.body)
		}
	}
	if cur, _ := e.node.Worker(idOf(t, workerURL(8001))); cur.Revision != rec.Revision {
		t.Error("a write went through")
	}
}
