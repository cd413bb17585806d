package console

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// view is one read of the Source, indexed for the diff.
type view struct {
	node    string
	peers   map[string]Peer
	workers map[string]Worker
	journal []Journal
	jkey    []byte // journal as JSON: compared, not walked
	leader  string
}

func newView(st State) *view {
	v := &view{node: st.Node, peers: make(map[string]Peer, len(st.Peers)), workers: make(map[string]Worker, len(st.Workers)), journal: st.Journal}
	for _, p := range st.Peers {
		v.peers[p.ID] = p
		if p.Raft == "leader" {
			v.leader = p.ID
		}
	}
	for _, w := range st.Workers {
		v.workers[w.ID] = w
	}
	v.jkey, _ = json.Marshal(st.Journal)
	return v
}

// delta is what changed from one view to the next, as a stream's "delta" event carries it.
type delta struct {
	V           uint64       `json:"v"`
	Peers       []Peer       `json:"peers,omitempty"`
	PeersGone   []string     `json:"peers_gone,omitempty"`
	Workers     []Worker     `json:"workers,omitempty"`
	WorkersGone []string     `json:"workers_gone,omitempty"`
	Journal     *[]Journal   `json:"journal,omitempty"` // set when it changed
	Transitions []Transition `json:"transitions,omitempty"`
}

func (d *delta) empty() bool {
	return len(d.Peers) == 0 && len(d.PeersGone) == 0 && len(d.Workers) == 0 && len(d.WorkersGone) == 0 &&
		d.Journal == nil && len(d.Transitions) == 0
}

// diff returns what changed from prev to next, with the transitions it shows, stamped now.
func diff(prev, next *view, now time.Time) delta {
	var d delta
	for id, p := range next.peers {
		o, ok := prev.peers[id]
		if ok && o == p {
			continue
		}
		d.Peers = append(d.Peers, p)
		switch {
		case !ok:
			d.Transitions = append(d.Transitions, Transition{At: now, Kind: "peer", Subject: id, To: p.Status,
				Text: "peer " + id + " appeared (" + p.Status + ")"})
		case o.Status != p.Status:
			d.Transitions = append(d.Transitions, Transition{At: now, Kind: "peer", Subject: id, From: o.Status, To: p.Status,
				Text: "peer " + id + ": " + o.Status + " → " + p.Status})
		}
	}
	for id := range prev.peers {
		if _, ok := next.peers[id]; !ok {
			d.PeersGone = append(d.PeersGone, id)
			d.Transitions = append(d.Transitions, Transition{At: now, Kind: "peer", Subject: id, Text: "peer " + id + " is forgotten"})
		}
	}
	if prev.leader != next.leader {
		d.Transitions = append(d.Transitions, Transition{At: now, Kind: "leader", Subject: next.leader, From: prev.leader, To: next.leader,
			Text: "raft leader: " + orNone(prev.leader) + " → " + orNone(next.leader)})
	}
	for id, w := range next.workers {
		o, ok := prev.workers[id]
		if ok && o == w {
			continue
		}
		d.Workers = append(d.Workers, w)
		if !ok {
			d.Transitions = append(d.Transitions, Transition{At: now, Kind: "worker", Subject: id, To: w.Owner,
				Text: id + " registered, owner " + orNone(w.Owner)})
			continue
		}
		d.Transitions = append(d.Transitions, workerTransitions(o, w, next, now)...)
	}
	for id := range prev.workers {
		if _, ok := next.workers[id]; !ok {
			d.WorkersGone = append(d.WorkersGone, id)
			d.Transitions = append(d.Transitions, Transition{At: now, Kind: "worker", Subject: id, Text: id + " removed"})
		}
	}
	if !bytes.Equal(prev.jkey, next.jkey) {
		j := next.journal
		if j == nil {
			j = []Journal{}
		}
		d.Journal = &j
	}
	slices.SortFunc(d.Peers, func(a, b Peer) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(d.Workers, func(a, b Worker) int { return strings.Compare(a.ID, b.ID) })
	slices.Sort(d.PeersGone)
	slices.Sort(d.WorkersGone)
	slices.SortStableFunc(d.Transitions, func(a, b Transition) int { return strings.Compare(a.Subject, b.Subject) })
	return d
}

// workerTransitions are the transitions of one worker that changed from o to w.
func workerTransitions(o, w Worker, next *view, now time.Time) []Transition {
	var out []Transition
	add := func(kind, from, to, text string) {
		out = append(out, Transition{At: now, Kind: kind, Subject: w.ID, From: from, To: to, Text: text})
	}
	if o.Owner != w.Owner {
		kind, why := "handoff", ""
		if p, ok := next.peers[o.Owner]; !ok || p.Status == "dead" || p.Status == "left" || p.Status == "suspect" {
			kind, why = "failover", " ("+orNone(o.Owner)+" is "+peerStatus(next, o.Owner)+")"
		}
		add(kind, o.Owner, w.Owner, w.ID+": owner "+orNone(o.Owner)+" → "+orNone(w.Owner)+why)
	}
	switch {
	case o.Routable && !w.Routable:
		add("routing", "in", "out", w.ID+" left routing: "+whyOut(w))
	case !o.Routable && w.Routable:
		add("routing", "out", "in", w.ID+" joined routing")
	default:
		if o.Health != w.Health {
			add("health", o.Health, w.Health, w.ID+": health "+o.Health+" → "+w.Health)
		}
		if o.Disabled != w.Disabled {
			state := map[bool]string{true: "disabled", false: "enabled"}
			add("worker", state[o.Disabled], state[w.Disabled], w.ID+" "+state[w.Disabled])
		}
	}
	if o.Breaker != w.Breaker {
		add("breaker", o.Breaker, w.Breaker, w.ID+": breaker "+o.Breaker+" → "+w.Breaker)
	}
	return out
}

// whyOut says why w is not routable.
func whyOut(w Worker) string {
	var why []string
	if w.Disabled {
		s := "disabled"
		if w.Reason != "" {
			s += " (" + w.Reason + ")"
		}
		why = append(why, s)
	}
	if w.Dead {
		why = append(why, "dead")
	}
	if w.Health != "ready" {
		why = append(why, "health "+w.Health)
	}
	if w.Breaker == "open" {
		why = append(why, "breaker open")
	}
	if len(why) == 0 {
		return "not selectable"
	}
	return strings.Join(why, ", ")
}

func peerStatus(v *view, id string) string {
	if p, ok := v.peers[id]; ok {
		return p.Status
	}
	return "gone"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
