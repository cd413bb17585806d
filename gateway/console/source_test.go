package console

import (
	"testing"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/admin"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/worker"
)

type fakeViews struct {
	peers   []admin.Peer
	rows    []admin.WorkerRow
	journal []fsm.JournalRecord
}

func (f fakeViews) PeersView() []admin.Peer          { return f.peers }
func (f fakeViews) WorkerRows() []admin.WorkerRow    { return f.rows }
func (f fakeViews) JournalView() []fsm.JournalRecord { return f.journal }

// TestAdminSource: the admin API's peers, rows and journal become the console's State: models
// joined, the hit ratio from the token counts (-1 before any), the owner's transitions with their
// own times, the journal's outcomes.
func TestAdminSource(t *testing.T) {
	at := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	v := fakeViews{
		peers: []admin.Peer{{ID: "gw1", Status: "alive", Raft: "leader", Region: "eu", Color: "blue", Owned: 1, AppliedIndex: 42, Self: true}},
		rows: []admin.WorkerRow{
			{ID: "w1", URL: "http://127.0.0.1:1", Owner: "gw1", Models: []string{"a", "b"}, Health: "ready", Breaker: "closed",
				Routable: true, PromptTokens: 200, Cached: 50, Transitions: []owned.Transition{{At: at, Kind: "health", From: "pending", To: "ready"}}},
			{ID: "w2", URL: "http://127.0.0.1:2", Owner: "gw2", Health: "unknown", Breaker: "unknown", Disabled: true, DisabledReason: "maint"},
		},
		journal: []fsm.JournalRecord{{ID: "j1", Coordinator: "gw1", Status: "running", StartedAt: at, Targets: []worker.ID{"w1", "w2"},
			Outcomes: map[worker.ID]string{"w1": "ok"}}},
	}
	st := AdminSource("gw1", v).State()
	if st.Node != "gw1" || len(st.Peers) != 1 || st.Peers[0].Applied != 42 || st.Peers[0].Color != "blue" || !st.Peers[0].Self {
		t.Errorf("peers %+v", st.Peers)
	}
	w1, w2 := st.Workers[0], st.Workers[1]
	if w1.Models != "a,b" || w1.Hit != 0.25 || !w1.Routable || w2.Hit != -1 || !w2.Disabled || w2.Reason != "maint" || w2.Models != "" {
		t.Errorf("workers %+v", st.Workers)
	}
	if len(st.Recent) != 1 || !st.Recent[0].At.Equal(at) || st.Recent[0].Subject != "w1" || st.Recent[0].Text != "w1: health pending → ready" {
		t.Errorf("recent %+v", st.Recent)
	}
	if len(st.Journal) != 1 || st.Journal[0].Targets != 2 || st.Journal[0].Outcomes["w1"] != "ok" || st.Journal[0].Status != "running" {
		t.Errorf("journal %+v", st.Journal)
	}
}
