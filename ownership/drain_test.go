package ownership

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/mesh"
)

// marks are drain marks of ids, for no process in particular (an older build's).
func marks(ids ...string) []fsm.DrainingPeer {
	out := make([]fsm.DrainingPeer, len(ids))
	for i, id := range ids {
		out[i] = fsm.DrainingPeer{ID: id, Since: t0}
	}
	return out
}

func TestDrainStates(t *testing.T) {
	workers := []Worker{w("w-a", "b1", 1, ""), w("w-b", "b1", 2, ""), {ID: "w-ipc", Owner: "b2", Epoch: 3, HostLocal: true}, w("w-c", "g1", 4, "")}
	peers := []Peer{
		peer("b1", "", mesh.StatusAlive, t0), peer("b2", "", mesh.StatusAlive, t0), peer("b3", "", mesh.StatusLeft, t0),
		peer("b4", "", mesh.StatusAlive, t0), peer("g1", "", mesh.StatusAlive, t0),
	}
	r := RaftView{Leader: "b4", Servers: map[string]string{"b1": "voter", "b4": "voter", "g1": "voter", "b2": "nonvoter"}}
	got := DrainStates([]string{"b5", "b4", "b3", "b2", "b1", "b1"}, marks("b1", "b2", "b3", "b4", "b5"), workers, peers, r)
	want := []DrainState{
		{Peer: "b1", Status: "alive", Owned: 2, Raft: "voter"},
		{Peer: "b2", Status: "alive", Owned: 1, Stuck: 1, Raft: "nonvoter"},
		{Peer: "b3", Status: "left", Done: true},
		{Peer: "b4", Status: "alive", Leader: true, Raft: "voter"},
		{Peer: "b5", Status: "unknown", Done: true},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if AllDone(got) || !AllDone(got[2:3]) || !AllDone(nil) {
		t.Error("AllDone")
	}
	// Alive but owning nothing, not leading and out of the configuration: not done until it
	// leaves the mesh.
	if s := DrainStates([]string{"g1"}, marks("g1"), nil, peers, RaftView{}); s[0].Done || s[0].Restarted {
		t.Errorf("an alive peer is done: %+v", s)
	}
}

// TestDrainStatesRestarted: a drain mark names the process it drains by its start time; the mesh
// listing the peer alive with another start time is a restart, whatever the rest says.
// Nothing without both times, nor for a peer that is not alive.
func TestDrainStatesRestarted(t *testing.T) {
	first, again := t0.Add(-time.Hour), t0.Add(time.Minute)
	mark := func(started time.Time) []fsm.DrainingPeer {
		return []fsm.DrainingPeer{{ID: "b1", Since: t0, Started: started}}
	}
	inCfg := RaftView{Leader: "g1", Servers: map[string]string{"g1": "voter", "b1": "nonvoter"}}
	out := RaftView{Leader: "g1", Servers: map[string]string{"g1": "voter"}}
	tests := []struct {
		name      string
		marks     []fsm.DrainingPeer
		peer      Peer
		workers   []Worker
		r         RaftView
		restarted bool
	}{
		{"started again, out of the configuration", mark(first), startedAt(peer("b1", "", mesh.StatusAlive, t0), again), nil, out, true},
		{"started again before the leader removed it", mark(first), startedAt(peer("b1", "", mesh.StatusAlive, t0), again), nil, inCfg, true},
		{"started again, owning the host-local worker that waited for it", mark(first), startedAt(peer("b1", "", mesh.StatusAlive, t0), again),
			[]Worker{{ID: "w-ipc", Owner: "b1", Epoch: 3, HostLocal: true}}, out, true},
		{"the process the mark drains, back from a partition", mark(first), startedAt(peer("b1", "", mesh.StatusAlive, t0), first), nil, out, false},
		// The drain's entry gateway still knew the earlier process.
		{"started again just before the drain was written", mark(first), startedAt(peer("b1", "", mesh.StatusAlive, t0), t0.Add(-time.Second)), nil, inCfg, false},
		{"a mark of an older build names no process", mark(time.Time{}), startedAt(peer("b1", "", mesh.StatusAlive, t0), again), nil, out, false},
		{"a peer of an older build publishes no start", mark(first), peer("b1", "", mesh.StatusAlive, t0), nil, out, false},
		{"started again but dead since", mark(first), startedAt(peer("b1", "", mesh.StatusDead, t0), again), nil, inCfg, false},
		{"started again but suspect", mark(first), startedAt(peer("b1", "", mesh.StatusSuspect, t0), again), nil, out, false},
		{"no mark", nil, startedAt(peer("b1", "", mesh.StatusAlive, t0), again), nil, out, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := DrainStates([]string{"b1"}, tt.marks, tt.workers, []Peer{tt.peer, peer("g1", "", mesh.StatusAlive, t0)}, tt.r)
			if len(s) != 1 || s[0].Restarted != tt.restarted || s[0].Done {
				t.Errorf("%+v; want restarted %v, not done", s, tt.restarted)
			}
			cleared := Finished(tt.marks, tt.workers, []Peer{tt.peer}, tt.r)
			if (len(cleared) == 1) != tt.restarted {
				t.Errorf("Finished = %+v; want the mark cleared: %v", cleared, tt.restarted)
			}
		})
	}
}

func TestFinished(t *testing.T) {
	workers := []Worker{{ID: "w-ipc", Owner: "b2", Epoch: 3, HostLocal: true}, w("w-a", "g1", 4, "")}
	peers := []Peer{peer("b1", "", mesh.StatusLeft, t0), peer("b2", "", mesh.StatusLeft, t0), peer("b3", "", mesh.StatusAlive, t0),
		peer("b4", "", mesh.StatusLeft, t0), startedAt(peer("b6", "", mesh.StatusAlive, t0), t0), peer("g1", "", mesh.StatusAlive, t0)}
	r := RaftView{Leader: "g1", Servers: map[string]string{"g1": "voter", "b4": "nonvoter"}}
	ms := append(marks("b1", "b2", "b3", "b4", "b5"), fsm.DrainingPeer{ID: "b6", Since: t0, Started: t0.Add(-time.Hour)})
	var got []string
	for _, s := range Finished(ms, workers, peers, r) {
		got = append(got, s.Peer)
	}
	if d := cmp.Diff([]string{"b1", "b5", "b6"}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
