package main

import (
	"testing"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/mesh"
)

func TestPeerStatus(t *testing.T) {
	for s, want := range map[mesh.Status]consensus.PeerStatus{
		mesh.StatusAlive: consensus.PeerAlive, mesh.StatusSuspect: consensus.PeerSuspect,
		mesh.StatusDead: consensus.PeerDead, mesh.StatusLeft: consensus.PeerLeft,
	} {
		if got, ok := peerStatus(s); !ok || got != want {
			t.Errorf("%v: %v, %v", s, got, ok)
		}
	}
	if _, ok := peerStatus(mesh.StatusForeign); ok {
		t.Error("a foreign peer is a raft peer")
	}
	if got := (&membership{}).Peers(); got != nil {
		t.Errorf("peers before the mesh started: %v", got)
	}
}
