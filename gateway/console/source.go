package console

import (
	"slices"
	"strings"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/admin"
)

// Source gives the mesh as this gateway sees it. It is called from one goroutine at a time, and
// each State must have slices of its own: the Hub keeps them, and sorts them by id.
type Source interface {
	State() State
}

// SourceFunc adapts a function to Source.
type SourceFunc func() State

// State calls f.
func (f SourceFunc) State() State { return f() }

// AdminViews are the admin API's answers as values; *admin.Handler implements it.
type AdminViews interface {
	PeersView() []admin.Peer
	WorkerRows() []admin.WorkerRow
	JournalView() []fsm.JournalRecord
}

// AdminSource reads the state from the admin API (what GET /mesh/peers, /workers and
// /weight_update_journal answer), as node sees them.
func AdminSource(node string, v AdminViews) Source {
	return SourceFunc(func() State {
		st := State{Node: node}
		for _, p := range v.PeersView() {
			st.Peers = append(st.Peers, Peer{ID: p.ID, Status: p.Status, Raft: p.Raft, Region: p.Region, Color: p.Color,
				Version: p.Version, Applied: p.AppliedIndex, Owned: p.Owned, Self: p.Self, Draining: p.Draining})
		}
		rows := v.WorkerRows()
		st.Workers = make([]Worker, 0, len(rows))
		for i := range rows {
			r := &rows[i]
			st.Workers = append(st.Workers, workerOf(r))
			for _, t := range r.Transitions {
				st.Recent = append(st.Recent, Transition{At: t.At, Kind: t.Kind, Subject: r.ID, From: t.From, To: t.To,
					Text: r.ID + ": " + t.Kind + " " + t.From + " → " + t.To})
			}
		}
		for _, j := range v.JournalView() {
			out := make(map[string]string, len(j.Outcomes))
			for id, o := range j.Outcomes {
				out[string(id)] = o
			}
			st.Journal = append(st.Journal, Journal{ID: j.ID, Coordinator: j.Coordinator, Status: j.State(),
				StartedAt: j.StartedAt.UTC(), Targets: len(j.Targets), Outcomes: out})
		}
		slices.SortFunc(st.Recent, func(a, b Transition) int { return a.At.Compare(b.At) })
		return st
	})
}

// workerOf is the console's row of an admin row.
func workerOf(r *admin.WorkerRow) Worker {
	w := Worker{ID: r.ID, URL: r.URL, Owner: r.Owner, Region: r.Region, Health: r.Health, Breaker: r.Breaker,
		Disabled: r.Disabled, Reason: r.DisabledReason, Dead: r.Dead, Routable: r.Routable, Stale: r.Stale, Hit: -1, Active: r.Active}
	switch len(r.Models) {
	case 0:
	case 1:
		w.Models = r.Models[0]
	default:
		w.Models = strings.Join(r.Models, ",")
	}
	if r.PromptTokens > 0 {
		w.Hit = float64(r.Cached) / float64(r.PromptTokens)
	}
	return w
}
