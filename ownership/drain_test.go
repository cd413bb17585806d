package ownership

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/mesh"
)

func TestDrainStates(t *testing.T) {
	workers := []Worker{w("w-a", "b1", 1, ""), w("w-b", "b1", 2, ""), {ID: "w-ipc", Owner: "b2", Epoch: 3, HostLocal: true}, w("w-c", "g1", 4, "")}
	peers := []Peer{
		peer("b1", "", mesh.StatusAlive, t0), peer("b2", "", mesh.StatusAlive, t0), peer("b3", "", mesh.StatusLeft, t0),
		peer("b4", "", mesh.StatusAlive, t0), peer("g1", "", mesh.StatusAlive, t0),
	}
	r := RaftView{Leader: "b4", Servers: map[string]string{"b1": "voter", "b4": "voter", "g1": "voter", "b2": "nonvoter"}}
	got := DrainStates([]string{"b5", "b4", "b3", "b2", "b1", "b1"}, workers, peers, r)
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
	if s := DrainStates([]string{"g1"}, nil, peers, RaftView{}); s[0].Done {
		t.Errorf("an alive peer is done: %+v", s)
	}
}

func TestFinished(t *testing.T) {
	workers := []Worker{{ID: "w-ipc", Owner: "b2", Epoch: 3, HostLocal: true}, w("w-a", "g1", 4, "")}
	peers := []Peer{peer("b1", "", mesh.StatusLeft, t0), peer("b2", "", mesh.StatusLeft, t0), peer("b3", "", mesh.StatusAlive, t0),
		peer("b4", "", mesh.StatusLeft, t0), peer("g1", "", mesh.StatusAlive, t0)}
	r := RaftView{Leader: "g1", Servers: map[string]string{"g1": "voter", "b4": "nonvoter"}}
	got := Finished([]string{"b1", "b2", "b3", "b4", "b5"}, workers, peers, r)
	if d := cmp.Diff([]string{"b1", "b5"}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
