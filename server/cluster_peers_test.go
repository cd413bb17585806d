package server

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/ownership"
	"github.com/meshgw/meshgw/test/testkit"
)

// TestPeersOfMembers: the voter reconciler and failover read every member but foreign ones,
// with the mesh's status as it is (and failover the start time of each process). The voter
// reconciler also reads a peer marked draining that the mesh does not list, as unknown, so that
// it leaves the configuration (voters rule 4).
func TestPeersOfMembers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	member := func(id string, s mesh.Status) mesh.Member {
		return mesh.Member{ID: id, Status: s, Since: t0, Meta: mesh.Meta{NodeID: id, RaftAddr: "raft-" + id, Region: "r-" + id}}
	}
	members := []mesh.Member{
		member("a", mesh.StatusAlive), member("s", mesh.StatusSuspect), member("d", mesh.StatusDead),
		member("l", mesh.StatusLeft), member("f", mesh.StatusForeign),
	}
	members[0].Meta.Started = t0.Add(-time.Hour)
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"raft", raftPeers(members, map[string]bool{"s": true, "gone": true, "f": true, "x": false}), []voters.Peer{
			{ID: "a", RaftAddress: "raft-a", Region: "r-a", Status: mesh.StatusAlive, Since: t0},
			{ID: "s", RaftAddress: "raft-s", Region: "r-s", Status: mesh.StatusSuspect, Since: t0, Draining: true},
			{ID: "d", RaftAddress: "raft-d", Region: "r-d", Status: mesh.StatusDead, Since: t0},
			{ID: "l", RaftAddress: "raft-l", Region: "r-l", Status: mesh.StatusLeft, Since: t0},
			{ID: "gone", Status: mesh.StatusUnknown, Draining: true},
		}},
		{"owners", ownerPeers(members), []ownership.Peer{
			{ID: "a", Region: "r-a", Status: mesh.StatusAlive, Since: t0, Started: t0.Add(-time.Hour)},
			{ID: "s", Region: "r-s", Status: mesh.StatusSuspect, Since: t0},
			{ID: "d", Region: "r-d", Status: mesh.StatusDead, Since: t0},
			{ID: "l", Region: "r-l", Status: mesh.StatusLeft, Since: t0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRaftInfoSaysTheVoterCount: GET /mesh/raft and /status say how many voters the leader
// wants, and whether it chose that count by the fleet's size (the default) or
// ClusterConfig.Voters (--raft-voters) fixed it.
func TestRaftInfoSaysTheVoterCount(t *testing.T) {
	tests := []struct {
		name   string
		voters int
		want   string
	}{
		{"the default: chosen by the fleet's size", 0, `"voters":1,"voters_wanted":1,"voters_auto":true,"fault_tolerant":false`},
		{"3 voters: at most the servers there are", 3, `"voters":1,"voters_wanted":1,"fault_tolerant":false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := startGateway(t, func(c *Config) { c.Cluster.Voters = tt.voters })
			for _, path := range []string{"/mesh/raft", "/status"} {
				if code, body := d.do(t, "GET", path, ""); code != 200 || !strings.Contains(body, tt.want) {
					t.Errorf("GET %s: %d %s; want %s in it", path, code, body, tt.want)
				}
			}
		})
	}
}

// TestRaftInfoCountsADrainedGatewayForTheGrace: right after a drain, GET /mesh/raft shows the
// voters wanted as the leader's planner counts them (voters rule 15): the drained gateway, gone
// from the configuration, still counts for --dead-voter-grace-secs, so three gateways with one
// drained show voters 2 of 3, on the leader and on a follower. They showed 2 of 2 (a count
// capped at the servers of the configuration).
func TestRaftInfoCountsADrainedGatewayForTheGrace(t *testing.T) {
	g1 := startGateway(t, func(c *Config) { c.NodeID = "gw-1" })
	g2 := startGateway(t, func(c *Config) { c.NodeID, c.Cluster.Join = "gw-2", []string{g1.MeshAddr()} })
	startGateway(t, func(c *Config) { c.NodeID, c.Cluster.Join = "gw-3", []string{g1.MeshAddr()} })
	testkit.For(t, "three voters of three", func() bool {
		_, body := g1.do(t, "GET", "/mesh/raft", "")
		return strings.Contains(body, `"voters":3,"voters_wanted":3,"voters_auto":true`)
	})
	if code, body := g1.do(t, "POST", "/mesh/drain", `{"peer": "gw-3"}`); code != 200 {
		t.Fatalf("POST /mesh/drain: %d %s", code, body)
	}
	for _, g := range []*testGateway{g1, g2} {
		testkit.For(t, g.NodeID()+"'s configuration without gw-3", func() bool {
			_, body := g.do(t, "GET", "/mesh/raft", "")
			return !strings.Contains(body, `"gw-3"`)
		})
		want := `"voters":2,"voters_wanted":3,"voters_auto":true`
		for _, path := range []string{"/mesh/raft", "/status"} {
			if code, body := g.do(t, "GET", path, ""); code != 200 || !strings.Contains(body, want) {
				t.Errorf("GET %s on %s: %d %s; want %s in it", path, g.NodeID(), code, body, want)
			}
		}
	}
}

// TestPeerRowsCountRaftsOwners: a peer's owned count is the raft records', not what it last
// published: a gateway that died keeps its last published figure after its workers moved.
func TestPeerRowsCountRaftsOwners(t *testing.T) {
	members := []mesh.Member{
		{ID: "gw-1", Status: mesh.StatusDead, Meta: mesh.Meta{NodeID: "gw-1", OwnedWorkers: 2}},
		{ID: "gw-2", Status: mesh.StatusAlive, Meta: mesh.Meta{NodeID: "gw-2", OwnedWorkers: 2}},
	}
	records := []fsm.Record{{ID: "w-1", Owner: "gw-2"}, {ID: "w-2", Owner: "gw-2"}, {ID: "w-3", Owner: "gw-2"}, {ID: "w-4", Owner: "gw-2"}}
	rows := peerRows(members, nil, nil, ownedCounts(records))
	if rows[0].Owned != 0 || rows[1].Owned != 4 {
		t.Errorf("owned %d and %d, want 0 for the dead gateway and 4 for the one its workers moved to", rows[0].Owned, rows[1].Owned)
	}
}
