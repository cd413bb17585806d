package console

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// view is one read of the Source, sorted by id for the diff: a merge of two sorted lists, with
// no map to build at 10,000 workers.
type view struct {
	node    string
	peers   []Peer
	peerAt  map[string]int // index in peers
	workers []Worker
	journal []Journal
	jkey    []byte // journal as JSON: compared, not walked
	leader  string
}

func newView(st State) *view {
	v := &view{node: st.Node, peers: st.Peers, workers: st.Workers, journal: st.Journal, peerAt: make(map[string]int, len(st.Peers))}
	v.peers = sortedByID(v.peers, func(p *Peer) string { return p.ID })
	v.workers = sortedByID(v.workers, func(w *Worker) string { return w.ID })
	for i, p := range v.peers {
		v.peerAt[p.ID] = i
		if p.Raft == "leader" {
			v.leader = p.ID
		}
	}
	v.jkey, _ = json.Marshal(st.Journal)
	return v
}

// sortedByID returns xs sorted by id: xs itself when it is (a Synthetic source, a sorted
// list), else a sorted copy made by sorting small (id, index) pairs rather than the rows, which
// are ten times their size (raft lists its records in no order: at 10,000 workers sorting the
// rows themselves took 10 ms).
func sortedByID[T any](xs []T, id func(*T) string) []T {
	sorted := true
	for i := 1; i < len(xs) && sorted; i++ {
		sorted = id(&xs[i-1]) <= id(&xs[i])
	}
	if sorted {
		return xs
	}
	type key struct {
		id string
		i  int
	}
	keys := make([]key, len(xs))
	for i := range xs {
		keys[i] = key{id(&xs[i]), i}
	}
	slices.SortFunc(keys, func(a, b key) int { return strings.Compare(a.id, b.id) })
	out := make([]T, len(xs))
	for i, k := range keys {
		out[i] = xs[k.i]
	}
	return out
}

func (v *view) peer(id string) (Peer, bool) {
	i, ok := v.peerAt[id]
	if !ok {
		return Peer{}, false
	}
	return v.peers[i], true
}

// merge walks two lists sorted by key and calls both for each key in either (nil for a side
// that lacks it).
func merge[T any](prev, next []T, key func(*T) string, both func(o, n *T)) {
	i, j := 0, 0
	for i < len(prev) || j < len(next) {
		switch {
		case j == len(next) || (i < len(prev) && key(&prev[i]) < key(&next[j])):
			both(&prev[i], nil)
			i++
		case i == len(prev) || key(&next[j]) < key(&prev[i]):
			both(nil, &next[j])
			j++
		default:
			both(&prev[i], &next[j])
			i++
			j++
		}
	}
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
	merge(prev.peers, next.peers, func(p *Peer) string { return p.ID }, func(o, p *Peer) {
		switch {
		case p == nil:
			d.PeersGone = append(d.PeersGone, o.ID)
			d.Transitions = append(d.Transitions, Transition{At: now, Kind: "peer", Subject: o.ID, Text: "peer " + o.ID + " is forgotten"})
		case o == nil:
			d.Peers = append(d.Peers, *p)
			d.Transitions = append(d.Transitions, Transition{At: now, Kind: "peer", Subject: p.ID, To: p.Status,
				Text: "peer " + p.ID + " appeared (" + p.Status + ")"})
		case *o != *p:
			d.Peers = append(d.Peers, *p)
			if o.Status != p.Status {
				d.Transitions = append(d.Transitions, Transition{At: now, Kind: "peer", Subject: p.ID, From: o.Status, To: p.Status,
					Text: "peer " + p.ID + ": " + o.Status + " → " + p.Status})
			}
		}
	})
	if prev.leader != next.leader {
		d.Transitions = append(d.Transitions, Transition{At: now, Kind: "leader", Subject: next.leader, From: prev.leader, To: next.leader,
			Text: "raft leader: " + orNone(prev.leader) + " → " + orNone(next.leader)})
	}
	merge(prev.workers, next.workers, func(w *Worker) string { return w.ID }, func(o, w *Worker) {
		switch {
		case w == nil:
			d.WorkersGone = append(d.WorkersGone, o.ID)
			d.Transitions = append(d.Transitions, Transition{At: now, Kind: "worker", Subject: o.ID, Text: o.ID + " removed"})
		case o == nil:
			d.Workers = append(d.Workers, *w)
			d.Transitions = append(d.Transitions, Transition{At: now, Kind: "worker", Subject: w.ID, To: w.Owner,
				Text: w.ID + " registered, owner " + orNone(w.Owner)})
		case *o != *w:
			d.Workers = append(d.Workers, *w)
			d.Transitions = append(d.Transitions, workerTransitions(*o, *w, next, now)...)
		}
	})
	if !bytes.Equal(prev.jkey, next.jkey) {
		j := next.journal
		if j == nil {
			j = []Journal{}
		}
		d.Journal = &j
	}
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
		if p, ok := next.peer(o.Owner); !ok || p.Status == "dead" || p.Status == "left" || p.Status == "suspect" {
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
	if p, ok := v.peer(id); ok {
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
