package console

import (
	"strings"
	"testing"
	"time"
)

func peersOf(ps ...Peer) []Peer { return ps }

func TestDiffTransitions(t *testing.T) {
	now := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	ready := Worker{ID: "w1", URL: "http://127.0.0.1:1", Owner: "gw2", Health: "ready", Breaker: "closed", Routable: true, Hit: -1}
	alive := func(id, raft string) Peer { return Peer{ID: id, Status: "alive", Raft: raft} }
	base := State{Node: "gw1", Peers: peersOf(alive("gw1", "leader"), alive("gw2", "voter"), alive("gw3", "voter")), Workers: []Worker{ready}}
	with := func(f func(*State)) State {
		s := base
		s.Peers = append([]Peer(nil), base.Peers...)
		s.Workers = append([]Worker(nil), base.Workers...)
		f(&s)
		return s
	}
	tests := []struct {
		name  string
		next  State
		kinds []string // the transitions' kinds, in order
		text  string   // one of them says this
	}{
		{"nothing changed", base, nil, ""},
		{"disabled", with(func(s *State) {
			s.Workers[0].Disabled, s.Workers[0].Reason, s.Workers[0].Routable = true, "maintenance", false
		}), []string{"routing"}, "w1 left routing: disabled (maintenance)"},
		{"failover from a dead owner", with(func(s *State) {
			s.Peers[1].Status = "dead"
			s.Workers[0].Owner = "gw3"
		}), []string{"peer", "failover"}, "w1: owner gw2 → gw3 (gw2 is dead)"},
		{"handoff between live peers", with(func(s *State) { s.Workers[0].Owner = "gw3" }), []string{"handoff"}, "w1: owner gw2 → gw3"},
		{"leader change", with(func(s *State) { s.Peers[0].Raft, s.Peers[2].Raft = "voter", "leader" }), []string{"leader"}, "raft leader: gw1 → gw3"},
		{"breaker opens", with(func(s *State) { s.Workers[0].Breaker, s.Workers[0].Routable = "open", false }), []string{"routing", "breaker"}, "w1 left routing: breaker open"},
		{"health without a routing change", with(func(s *State) {
			s.Workers[0].Routable = false
			s.Workers[0].Disabled = true
		}), []string{"routing"}, "disabled"},
		{"worker removed", with(func(s *State) { s.Workers = nil }), []string{"worker"}, "w1 removed"},
		{"worker registered", with(func(s *State) {
			s.Workers = append(s.Workers, Worker{ID: "w2", Owner: "gw1", Health: "pending", Breaker: "unknown", Hit: -1})
		}), []string{"worker"}, "w2 registered, owner gw1"},
		{"a row changes with no transition", with(func(s *State) { s.Workers[0].Hit = 0.5 }), nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := diff(newView(base), newView(tc.next), now)
			var kinds []string
			found := tc.text == ""
			for _, tr := range d.Transitions {
				kinds = append(kinds, tr.Kind)
				if !tr.At.Equal(now) {
					t.Errorf("transition %q at %v, want %v", tr.Text, tr.At, now)
				}
				found = found || strings.Contains(tr.Text, tc.text)
			}
			if strings.Join(kinds, ",") != strings.Join(tc.kinds, ",") {
				t.Errorf("kinds %v, want %v (%+v)", kinds, tc.kinds, d.Transitions)
			}
			if !found {
				t.Errorf("no transition says %q: %+v", tc.text, d.Transitions)
			}
			if tc.name == "nothing changed" && !d.empty() {
				t.Errorf("delta of an unchanged state: %+v", d)
			}
			if tc.name == "a row changes with no transition" && len(d.Workers) != 1 {
				t.Errorf("the changed row is not in the delta: %+v", d)
			}
		})
	}
}
