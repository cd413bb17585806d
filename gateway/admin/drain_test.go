package admin

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/ownership"
	"github.com/meshgw/meshgw/worker"
)

// fakeDrain records the drains asked and reports them done after rounds reads.
type fakeDrain struct {
	mu     sync.Mutex
	asked  [][]string
	rounds int
	reads  int
}

func (f *fakeDrain) Drain(_ context.Context, peers []string) (ownership.Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, peers)
	return ownership.Outcome{Moved: []worker.ID{"w-1", "w-2"}, Stuck: []worker.ID{"w-ipc"}, Index: 42}, nil
}

func (f *fakeDrain) DrainStates(peers []string) []ownership.DrainState {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	var out []ownership.DrainState
	for _, p := range peers {
		out = append(out, ownership.DrainState{Peer: p, Status: "alive", Raft: "voter", Done: f.reads > f.rounds})
	}
	return out
}

func TestDrainRoute(t *testing.T) {
	peers := &fakePeers{list: []Peer{
		{ID: "b1", Status: "alive", Color: "blue"}, {ID: "b2", Status: "suspect", Color: "blue"}, {ID: "b3", Status: "dead", Color: "blue"},
		{ID: "g1", Status: "alive", Color: "green"}, {ID: "x", Status: "foreign", Color: "blue"},
	}}
	tests := []struct {
		name, body string
		rounds     int
		timeout    time.Duration
		status     int
		code       string
		asked      []string
	}{
		{"by color: alive and suspect", `{"color":"blue"}`, 0, time.Minute, 200, "", []string{"b1", "b2"}},
		{"by peer, dead too", `{"peer":"b3"}`, 0, time.Minute, 200, "", []string{"b3"}},
		{"not done in time", `{"peer":"b1"}`, 1 << 30, 50 * time.Millisecond, 202, "", []string{"b1"}},
		{"unknown peer", `{"peer":"b9"}`, 0, time.Minute, 404, "peer_not_found", nil},
		{"a foreign peer is not ours", `{"peer":"x"}`, 0, time.Minute, 404, "peer_not_found", nil},
		{"unknown color", `{"color":"red"}`, 0, time.Minute, 404, "peer_not_found", nil},
		{"a green peer while blue stays", `{"peer":"g1"}`, 0, time.Minute, 200, "", []string{"g1"}},
		{"both", `{"peer":"b1","color":"blue"}`, 0, time.Minute, 400, "invalid_request", nil},
		{"neither", `{}`, 0, time.Minute, 400, "invalid_request", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDrain{rounds: tt.rounds}
			fleet := &fakeFleet{}
			e := newEnv(t, nil)
			h := e.handler(func(c *Config) {
				c.Peers, c.Drainer, c.Drains, c.DrainTimeout, c.Fleet = peers, f, f, tt.timeout, fleet
			})
			a := do(h, req{method: "POST", uri: "/mesh/drain", body: tt.body})
			if a.status != tt.status || a.errCode() != tt.code {
				t.Fatalf("%d %s; want %d %s", a.status, a.body, tt.status, tt.code)
			}
			var asked []string
			if len(f.asked) == 1 {
				asked = f.asked[0]
			}
			if d := cmp.Diff(tt.asked, asked); d != "" {
				t.Errorf("drained (-want +got):\n%s", d)
			}
			if tt.status >= 300 {
				return
			}
			var ans drainAnswer
			if err := json.Unmarshal([]byte(a.body), &ans); err != nil {
				t.Fatal(err)
			}
			if ans.Done != (tt.status == 200) || ans.Moved != 2 || len(ans.Stuck) != 1 || len(ans.States) != len(tt.asked) ||
				ans.FleetAck == nil || ans.FleetAck.Index != 42 {
				t.Errorf("answer %+v", ans)
			}
		})
	}
	// Draining the last alive gateway but one that is not named: refused.
	e := newEnv(t, nil)
	lonely := &fakePeers{list: []Peer{{ID: "b1", Status: "alive", Color: "blue"}, {ID: "g1", Status: "dead", Color: "green"}}}
	f := &fakeDrain{}
	h := e.handler(func(c *Config) { c.Peers, c.Drainer, c.Drains, c.DrainTimeout = lonely, f, f, time.Minute })
	if a := do(h, req{method: "POST", uri: "/mesh/drain", body: `{"color":"blue"}`}); a.status != 409 || a.errCode() != "no_peer_left" || len(f.asked) != 0 {
		t.Errorf("draining every alive gateway: %d %s", a.status, a.body)
	}
	if a := do(h, req{method: "GET", uri: "/mesh/drain"}); a.status != 200 || a.body != `{"draining":null}` {
		t.Errorf("GET /mesh/drain: %d %s", a.status, a.body)
	}
}
