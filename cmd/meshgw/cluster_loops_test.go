package main

import (
	"slices"
	"testing"

	"github.com/meshgw/meshgw/mesh"
)

// TestBootstrapPeers: --bootstrap-expect counts the alive peers without a cluster id that
// publish a raft address and are not leaving, lowest id first (the one that bootstraps).
func TestBootstrapPeers(t *testing.T) {
	member := func(id string, s mesh.Status, edit func(*mesh.Meta)) mesh.Member {
		meta := mesh.Meta{NodeID: id, RaftAddr: "127.0.0.1:1"}
		if edit != nil {
			edit(&meta)
		}
		return mesh.Member{ID: id, Status: s, Meta: meta}
	}
	got := bootstrapPeers([]mesh.Member{
		member("gw-c", mesh.StatusAlive, nil),
		member("gw-a", mesh.StatusAlive, nil),
		member("gw-b", mesh.StatusAlive, nil),
		member("gw-0", mesh.StatusDead, nil),
		member("gw-1", mesh.StatusLeft, nil),
		member("gw-2", mesh.StatusForeign, nil),
		member("gw-3", mesh.StatusAlive, func(m *mesh.Meta) { m.ClusterID = "c1" }),
		member("gw-4", mesh.StatusAlive, func(m *mesh.Meta) { m.RaftAddr = "" }),
		member("gw-5", mesh.StatusAlive, func(m *mesh.Meta) { m.Leaving = true }),
	})
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID)
	}
	if want := []string{"gw-a", "gw-b", "gw-c"}; !slices.Equal(ids, want) {
		t.Errorf("bootstrap peers %v, want %v", ids, want)
	}
}
