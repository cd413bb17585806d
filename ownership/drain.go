package ownership

import (
	"slices"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/mesh"
)

// DrainState is what is left of the drain of one peer, as one gateway sees it.
type DrainState struct {
	Peer string `json:"peer"`
	// Status is the peer's mesh status: "left" once it left the mesh.
	Status string `json:"status"`
	// Owned counts the workers it still owns; Stuck those of them that cannot move (host-local).
	Owned int `json:"owned"`
	Stuck int `json:"stuck"`
	// Leader says it leads raft; Raft is its place in the configuration: "voter", "nonvoter" or
	// "" once it left it.
	Leader bool   `json:"leader"`
	Raft   string `json:"raft"`
	// Restarted: the mesh lists the peer alive as another process than the one its drain mark
	// names (the gateway was started again). That drain is over whatever the rest says: the
	// leader clears the mark, and the gateway joins as a new one.
	Restarted bool `json:"restarted,omitempty"`
	// Done: it owns nothing, leads nothing, is out of the configuration and out of the mesh.
	Done bool `json:"done"`
}

// RaftView is the raft configuration as a drain's progress reads it.
type RaftView struct {
	Leader string
	// Servers maps each server of the configuration to "voter" or "nonvoter".
	Servers map[string]string
}

// DrainStates returns the state of the drain of each of peers (sorted by id), from the drain
// marks, the records, the mesh's peers and the raft configuration. It is pure. A peer is done
// once it owns no worker, does not lead, is out of the configuration, and is gone from the mesh
// (left, dead or no longer listed). It is restarted once the mesh lists it alive with a start
// time its mark is not for (mesh.Meta.Started, fsm.DrainingPeer.For: another process, started
// after the mark was written); a mark or a peer without one never makes a restart.
func DrainStates(peers []string, marks []fsm.DrainingPeer, workers []Worker, mesh []Peer, r RaftView) []DrainState {
	byID := peersByID(mesh)
	owned, stuck := make(map[string]int), make(map[string]int)
	for _, w := range workers {
		owned[w.Owner]++
		if w.HostLocal {
			stuck[w.Owner]++
		}
	}
	ids := slices.Clone(peers)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make([]DrainState, 0, len(ids))
	for _, id := range ids {
		st := statusOf(byID, id)
		s := DrainState{Peer: id, Status: st.String(), Owned: owned[id], Stuck: stuck[id], Leader: r.Leader == id, Raft: r.Servers[id]}
		s.Done = s.Owned == 0 && !s.Leader && s.Raft == "" && gone(st)
		s.Restarted = restarted(marks, byID[id])
		out = append(out, s)
	}
	return out
}

// restarted reports whether the mesh lists p alive as another process than the one its drain
// mark is for (fsm.DrainingPeer.For). A mark or a peer without a start time (an older build)
// never makes a restart.
func restarted(marks []fsm.DrainingPeer, p Peer) bool {
	if p.Status != mesh.StatusAlive || p.Started.IsZero() {
		return false
	}
	i := slices.IndexFunc(marks, func(m fsm.DrainingPeer) bool { return m.ID == p.ID })
	return i >= 0 && !marks[i].Started.IsZero() && !marks[i].For(p.Started)
}

// statusOf is a peer's mesh status, mesh.StatusUnknown when the mesh does not list it.
func statusOf(byID map[string]Peer, id string) mesh.Status {
	if p, ok := byID[id]; ok {
		return p.Status
	}
	return mesh.StatusUnknown
}

// Finished returns the states of the drains whose marks to clear (sorted by peer): those of
// peers whose drain is done, and of peers restarted since (see DrainStates). Only the raft leader clears them, on each pass of
// its duty (a pass after a leader change clears what the last leader left). A gateway started
// again with the same id, whenever it comes back, then joins as a new one instead of draining
// again: the voter reconciler adds it to the configuration, and it takes workers again. One
// that is gone but still owns a host-local worker keeps its mark, and its workers wait for it.
func Finished(marks []fsm.DrainingPeer, workers []Worker, mesh []Peer, r RaftView) []DrainState {
	ids := make([]string, len(marks))
	for i, m := range marks {
		ids[i] = m.ID
	}
	var out []DrainState
	for _, s := range DrainStates(ids, marks, workers, mesh, r) {
		if s.Done || s.Restarted {
			out = append(out, s)
		}
	}
	return out
}

// AllDone reports whether every state is done.
func AllDone(states []DrainState) bool {
	for _, s := range states {
		if !s.Done {
			return false
		}
	}
	return true
}
