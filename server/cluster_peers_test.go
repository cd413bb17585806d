package server

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/ownership"
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
