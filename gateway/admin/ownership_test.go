package admin

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/ownership"
	"github.com/meshgw/meshgw/test/testkit"
)

// staticPeers is a mesh of alive peers that never changes.
type staticPeers []ownership.Peer

func (s staticPeers) Peers() []ownership.Peer          { return s }
func (s staticPeers) Watch() (<-chan struct{}, func()) { return nil, func() {} }

// ownershipEnv is an env whose handler moves workers with a real Operator over its node, in a
// mesh of n1, n2, n3 (alive) and n4 (dead), all of the handler's region eu,, with a fleet that
// records what it acknowledged.
func ownershipEnv(t *testing.T) (*env, *fakeFleet) {
	t.Helper()
	fleet := &fakeFleet{}
	peers := staticPeers{
		{ID: "n1", Region: "eu", Status: mesh.StatusAlive}, {ID: "n2", Region: "eu", Status: mesh.StatusAlive},
		{ID: "n3", Region: "eu", Status: mesh.StatusAlive}, {ID: "n4", Region: "eu", Status: mesh.StatusDead, Since: time.Now()},
	}
	e := newEnv(t, nil)
	op := ownership.NewOperator(ownership.OperatorConfig{Records: e.node, Membership: peers, Apply: e.writer, Logger: testkit.Quiet()})
	e.h = e.handler(func(c *Config) { c.Ownership, c.Fleet = op, fleet })
	return e, fleet
}

func TestTransfer(t *testing.T) {
	e, fleet := ownershipEnv(t)
	rec := e.register(t, `{"url":"`+workerURL(8001)+`"}`)
	if _, err := e.writer.Apply(t.Context(), fsm.OperatorReassign{Reason: "drain", Drain: []string{"n3"}}); err != nil {
		t.Fatal(err)
	}
	path := "/workers/" + rec.ID + "/transfer"
	tests := []struct {
		name, uri, body string
		status          int
		code            string
		owner           string
	}{
		{"moves", path, `{"to":"n2"}`, 200, "", "n2"},
		{"to the owner: nothing to do", path, `{"to":"n2"}`, 200, "", "n2"},
		{"by URL", "/workers/" + url.PathEscape(workerURL(8001)) + "/transfer", `{"to":"n1"}`, 200, "", "n1"},
		{"with a query", path + "?pretty=1", `{"to":"n2"}`, 200, "", "n2"},
		{"to an unknown peer", path, `{"to":"n9"}`, 404, "peer_not_found", ""},
		{"to a dead peer", path, `{"to":"n4"}`, 409, "peer_unavailable", ""},
		{"to a draining peer", path, `{"to":"n3"}`, 409, "peer_unavailable", ""},
		{"without to", path, `{}`, 400, "invalid_field", ""},
		{"an unknown field", path, `{"to":"n2","force":true}`, 400, "unknown_field", ""},
		{"an unknown worker", "/workers/w-000000000000/transfer", `{"to":"n2"}`, 404, "worker_not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := e.node.Worker(idOf(t, workerURL(8001)))
			a := do(e.h, req{method: "POST", uri: tt.uri, body: tt.body})
			if a.status != tt.status || a.errCode() != tt.code {
				t.Fatalf("%d %s; want %d %s", a.status, a.body, tt.status, tt.code)
			}
			after, _ := e.node.Worker(idOf(t, workerURL(8001)))
			if tt.status != 200 {
				if after.Owner != before.Owner || after.Epoch != before.Epoch {
					t.Errorf("a refused transfer changed the record: %+v -> %+v", before, after)
				}
				return
			}
			r := a.record(t)
			if r.Owner != tt.owner || after.Owner != tt.owner || r.Epoch != after.Epoch {
				t.Errorf("answer owner %s epoch %d, record %s@%d; want %s", r.Owner, r.Epoch, after.Owner, after.Epoch, tt.owner)
			}
			moved := before.Owner != tt.owner
			if moved && (r.FleetAck == nil || r.FleetAck.Index != after.Epoch) {
				t.Errorf("a move answered before the fleet acknowledged its entry: %+v (acked %v)", r.FleetAck, fleet.acked)
			}
			if !moved && (r.FleetAck != nil || after.Epoch != before.Epoch) {
				t.Errorf("a transfer to the owner wrote: %+v", r)
			}
		})
	}
}

func TestRebalanceRoute(t *testing.T) {
	e, fleet := ownershipEnv(t)
	for i := range 6 {
		e.register(t, fmt.Sprintf(`{"url":"%s"}`, workerURL(8001+i)))
	}
	var ans rebalanceAnswer
	decode := func(a answer) {
		t.Helper()
		if a.status != 200 {
			t.Fatalf("%d %s", a.status, a.body)
		}
		ans = rebalanceAnswer{}
		if err := json.Unmarshal([]byte(a.body), &ans); err != nil {
			t.Fatal(err)
		}
	}
	decode(do(e.h, req{method: "POST", uri: "/mesh/rebalance", body: `{"dry_run":true}`}))
	if !ans.DryRun || len(ans.Moves) != 4 || ans.Moved != 0 || ans.Owners["n1"] != 6 || ans.FleetAck != nil {
		t.Fatalf("dry run: %+v", ans)
	}
	for _, m := range ans.Moves {
		if m.From != "n1" || (m.To != "n2" && m.To != "n3") || m.URL == "" || m.Epoch == 0 {
			t.Errorf("move %+v", m)
		}
	}
	decode(do(e.h, req{method: "POST", uri: "/mesh/rebalance"}))
	if ans.DryRun || ans.Moved != 4 || ans.Owners["n1"] != 2 || ans.Owners["n2"] != 2 || ans.Owners["n3"] != 2 || ans.FleetAck == nil {
		t.Fatalf("rebalance: %+v", ans)
	}
	if last := fleet.acked[len(fleet.acked)-1]; last != ans.FleetAck.Index || last != e.node.AppliedIndex() {
		t.Errorf("acknowledged %v, answer %+v, applied %d", fleet.acked, ans.FleetAck, e.node.AppliedIndex())
	}
	decode(do(e.h, req{method: "POST", uri: "/mesh/rebalance", body: `{}`}))
	if len(ans.Moves) != 0 || ans.Moved != 0 {
		t.Errorf("a second rebalance moved: %+v", ans)
	}
	if a := do(e.h, req{method: "POST", uri: "/mesh/rebalance", body: `{"dry_run":"yes"}`}); a.status != 400 {
		t.Errorf("a bad body: %d %s", a.status, a.body)
	}
	if a := do(e.h, req{method: "GET", uri: "/mesh/rebalance"}); a.status != 405 {
		t.Errorf("GET: %d %s", a.status, a.body)
	}
}
