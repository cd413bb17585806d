package ownership

import (
	"slices"

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
	// Done: it owns nothing, leads nothing, is out of the configuration and out of the mesh.
	Done bool `json:"done"`
}

// RaftView is the raft configuration as a drain's progress reads it.
type RaftView struct {
	Leader string
	// Servers maps each server of the configuration to "voter" or "nonvoter".
	Servers map[string]string
}

// DrainStates returns the state of the drain of each of peers (sorted by id), from the records,
// the mesh's peers and the raft configuration. It is pure. A peer is done once it owns no
// worker, does not lead, is out of the configuration, and is gone from the mesh (left, dead or
// no longer listed).
func DrainStates(peers []string, workers []Worker, mesh []Peer, r RaftView) []DrainState {
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
		out = append(out, s)
	}
	return out
}

// statusOf is a peer's mesh status, mesh.StatusUnknown when the mesh does not list it.
func statusOf(byID map[string]Peer, id string) mesh.Status {
	if p, ok := byID[id]; ok {
		return p.Status
	}
	return mesh.StatusUnknown
}

// Finished returns the drain marks to clear (sorted): those of peers whose drain is done (see
// DrainStates). A gateway restarted later with the same id then joins as a new one instead of
// draining again; one that still owns a host-local worker keeps its mark, and its workers wait
// for it.
func Finished(marks []string, workers []Worker, mesh []Peer, r RaftView) []string {
	var out []string
	for _, s := range DrainStates(marks, workers, mesh, r) {
		if s.Done {
			out = append(out, s.Peer)
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
