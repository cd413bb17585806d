package voters_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/mesh"
)

func TestAutoCount(t *testing.T) {
	for gateways, want := range []int{1, 1, 1, 3, 3, 5, 5, 5, 5, 5, 5} {
		if got := voters.AutoCount(gateways); got != want {
			t.Errorf("AutoCount(%d) = %d; want %d", gateways, got, want)
		}
	}
}

// five is a configuration of five voters n1 to n5.
func five() raft.Configuration {
	return conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5"))
}

// alives returns an alive peer in region "a" for each id.
func alives(ids ...string) []voters.Peer {
	out := make([]voters.Peer, len(ids))
	for i, id := range ids {
		out[i] = alive(id, "a")
	}
	return out
}

// TestWantedFleet: which gateways the automatic count counts (rule 15).
func TestWantedFleet(t *testing.T) {
	grace := voters.DefaultDeadVoterGrace
	tests := []struct {
		name  string
		cfg   raft.Configuration
		peers []voters.Peer
		want  int
		// leader says only the leader's planner counts this way: it knows it runs (Self).
		leader bool
	}{
		{name: "one gateway", cfg: conf(voter("n1")), peers: alives("n1"), want: 1},
		{name: "two gateways: one voter", cfg: conf(voter("n1"), nonvoter("n2")), peers: alives("n1", "n2"), want: 1},
		{name: "an alive peer not in the configuration yet counts", cfg: conf(voter("n1"), nonvoter("n2")), peers: alives("n1", "n2", "n3"), want: 3},
		{name: "four gateways: three", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")), peers: alives("n1", "n2", "n3", "n4"), want: 3},
		{name: "five gateways: five", cfg: five(), peers: alives("n1", "n2", "n3", "n4", "n5"), want: 5},
		{name: "seven gateways: five", cfg: five(), peers: alives("n1", "n2", "n3", "n4", "n5", "n6", "n7"), want: 5},
		{name: "dead and suspect servers count (a kill, a pause, a partition)", cfg: five(),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), peer("n3", "a", mesh.StatusSuspect, 0), peer("n4", "a", mesh.StatusDead, 2*grace), peer("n5", "a", mesh.StatusDead, 0)},
			want:  5},
		{name: "a server the mesh does not list counts", cfg: five(), peers: alives("n1", "n2", "n3"), want: 5},
		{name: "and so does one the leader clocks as missing, past the grace, while it is in the configuration", cfg: five(),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), unlisted("n4", 2*grace), unlisted("n5", time.Second)}, want: 5},
		{name: "once rule 6 removed one of them, it no longer counts: four gateways keep three", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), unlisted("n4", time.Second)}, want: 3},
		{name: "a rejoining peer out of the configuration counts (a wiped disk)", cfg: conf(voter("n1"), voter("n2"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), rejoining(alive("n3", "a")), alive("n4", "a"), alive("n5", "a")}, want: 5},
		{name: "a dead peer out of the configuration does not (removed past the grace)", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), peer("n5", "a", mesh.StatusDead, 3*grace)}, want: 3},
		{name: "a draining server counts while it is there", cfg: five(),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), draining(alive("n5", "a"))}, want: 5},
		{name: "a gateway that left counts for the grace (a restart)", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), peer("n5", "a", mesh.StatusLeft, grace)}, want: 5},
		{name: "and no longer past it", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), peer("n5", "a", mesh.StatusLeft, grace+time.Second)}, want: 3},
		{name: "a drained gateway declared dead counts for the grace", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), draining(peer("n5", "a", mesh.StatusDead, time.Second))}, want: 5},
		{name: "a drained gateway the mesh does not list does not", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), nonvoter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), draining(voters.Peer{ID: "n5", Status: mesh.StatusUnknown})}, want: 3},
		{name: "a server that left counts for the grace", cfg: five(),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), peer("n5", "a", mesh.StatusLeft, 0)}, want: 5},
		{name: "a voter that left without a drain counts past the grace too, as a dead one (it keeps its seat, rules 6 and 7)", cfg: five(),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), peer("n5", "a", mesh.StatusLeft, 2*grace)}, want: 5},
		{name: "three voters, one that left without a drain past the grace: three", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), peer("n3", "a", mesh.StatusLeft, 2*grace)}, want: 3},
		{name: "a draining voter that left counts for the grace only", cfg: five(),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), draining(peer("n5", "a", mesh.StatusLeft, 2*grace))}, want: 3},
		{name: "a non-voter that left counts for the grace only", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), nonvoter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), peer("n5", "a", mesh.StatusLeft, 2*grace)}, want: 3},
		{name: "Self counts whatever the mesh last said of it", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{peer("n1", "a", mesh.StatusLeft, 0), alive("n2", "a"), alive("n3", "a")}, want: 3, leader: true},
		{name: "Self draining counts", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{draining(alive("n1", "a")), alive("n2", "a"), alive("n3", "a")}, want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, fleet, _ := voters.Planned(tt.cfg, tt.peers, planNow, voters.Options{Self: "n1"})
			if want != tt.want {
				t.Fatalf("voters wanted %d (fleet %d); want %d", want, fleet, tt.want)
			}
			if got := voters.Wanted(tt.cfg, tt.peers, planNow, voters.Options{}); got != tt.want && !tt.leader {
				t.Fatalf("Wanted = %d; want %d", got, tt.want)
			}
			if got := voters.Wanted(tt.cfg, tt.peers, planNow, voters.Options{Voters: 3}); got != 3 {
				t.Fatalf("Wanted with --raft-voters 3 = %d", got)
			}
		})
	}
}

// TestPlanAuto: single plans under the automatic count (Voters 0).
func TestPlanAuto(t *testing.T) {
	grace := voters.DefaultDeadVoterGrace
	dead := func(id string) voters.Peer { return peer(id, "a", mesh.StatusDead, 2*grace) }
	tests := []struct {
		name  string
		cfg   raft.Configuration
		peers []voters.Peer
		want  []voters.Change
	}{
		{name: "two gateways keep one voter", cfg: conf(voter("n1"), nonvoter("n2")), peers: alives("n1", "n2")},
		{name: "the third gateway: a second voter", cfg: conf(voter("n1"), nonvoter("n2"), nonvoter("n3")), peers: alives("n1", "n2", "n3"),
			want: []voters.Change{promote("n2")}},
		{name: "the fifth gateway: a fourth voter", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4"), nonvoter("n5")),
			peers: alives("n1", "n2", "n3", "n4", "n5"), want: []voters.Change{promote("n4")}},
		{name: "a fourth gateway is no voter", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")), peers: alives("n1", "n2", "n3", "n4")},
		{name: "two of five dead within the grace: nothing", cfg: five(),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), peer("n4", "a", mesh.StatusDead, time.Second), peer("n5", "a", mesh.StatusDead, time.Second)}},
		{name: "two of five cut off (suspect) for long: nothing", cfg: five(),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), peer("n4", "a", mesh.StatusSuspect, time.Hour), peer("n5", "a", mesh.StatusSuspect, time.Hour)}},
		{name: "two of five dead past the grace: the longest dead goes", cfg: five(),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), dead("n4"), peer("n5", "a", mesh.StatusDead, 3*grace)},
			want:  []voters.Change{remove("n5")}},
		{name: "then the other one: four voters leave three", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), dead("n4"), peer("n5", "a", mesh.StatusDead, 3*grace)},
			want:  []voters.Change{remove("n4")}},
		{name: "one of three dead past the grace, nobody to take its seat: it stays", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), dead("n3")}},
		{name: "one of three dead past the grace, a non-voter to take its seat: it goes", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), dead("n3"), alive("n4", "a")},
			want:  []voters.Change{remove("n3")}},
		{name: "one of three dead past the grace, the non-voter not reached: it stays", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), dead("n3"), unreachable(alive("n4", "a"))}},
		{name: "two voters, one dead past the grace: it goes, and writes resume", cfg: conf(voter("n1"), voter("n2")),
			peers: []voters.Peer{alive("n1", "a"), dead("n2")}, want: []voters.Change{remove("n2")}},
		{name: "a wiped voter of five gives its seat back", cfg: five(),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), rejoining(alive("n3", "a")), alive("n4", "a"), alive("n5", "a")},
			want:  []voters.Change{remove("n3")}},
		{name: "and the four left are not demoted to three: it still counts", cfg: conf(voter("n1"), voter("n2"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), rejoining(alive("n3", "a")), alive("n4", "a"), alive("n5", "a")},
			want:  []voters.Change{add("n3")}},
		{name: "a drain of one of five: its seat goes first", cfg: five(),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), draining(alive("n5", "a"))},
			want:  []voters.Change{demote("n5")}},
		{name: "then four voters while it is there", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), nonvoter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), draining(alive("n5", "a"))}},
		{name: "and once it left, for the grace: it may be restarted at once", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), draining(peer("n5", "a", mesh.StatusLeft, grace))}},
		{name: "gone past the grace: four voters of three wanted", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), draining(peer("n5", "a", mesh.StatusLeft, grace+time.Second))},
			want:  []voters.Change{demote("n4")}},
		{name: "a drain with two voters down waits: its seat cannot go without the quorum", cfg: five(),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), peer("n3", "a", mesh.StatusDead, time.Second), peer("n4", "a", mesh.StatusDead, time.Second), draining(alive("n5", "a"))}},
		{name: "a fleet of three with one gone for the grace keeps three voters", cfg: conf(voter("n1"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusLeft, time.Second), alive("n3", "a")}},
		{name: "gone past it: two gateways keep one voter", cfg: conf(voter("n1"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusLeft, 2*grace), alive("n3", "a")},
			want:  []voters.Change{demote("n3")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := voters.Plan(tt.cfg, tt.peers, planNow, voters.Options{Self: "n1"})
			if diff := cmp.Diff(tt.want, got, ignoreReason, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("plan (-want +got):\n%s", diff)
			}
			for _, c := range got {
				if strings.Contains(c.Reason, "wanted") && !strings.Contains(c.Reason, "wanted (auto, ") {
					t.Errorf("%+v: the reason does not say the count is automatic", c)
				}
			}
		})
	}
}

// TestShown: what GET /mesh/raft and meshctl raft show as the voters wanted is the planner's
// own count (rule 15), not a count capped at the servers of the configuration: right after a
// drain or a leave the gateway that went still counts for the grace, as it does for the
// leader.
func TestShown(t *testing.T) {
	grace := voters.DefaultDeadVoterGrace
	two := alives("n1", "n2")
	tests := []struct {
		name     string
		cfg      raft.Configuration
		peers    []voters.Peer
		voters   int
		want     int
		wantAuto bool
	}{
		{name: "three voters", cfg: conf(voter("n1"), voter("n2"), voter("n3")), peers: alives("n1", "n2", "n3"), want: 3, wantAuto: true},
		{name: "a drained voter removed once it left, within the grace: 2 of 3", cfg: conf(voter("n1"), voter("n2")),
			peers: append(two, draining(peer("n3", "a", mesh.StatusLeft, time.Second))), want: 3, wantAuto: true},
		{name: "past the grace: 2 of 1, which the leader demotes to 1 of 1", cfg: conf(voter("n1"), voter("n2")),
			peers: append(two, draining(peer("n3", "a", mesh.StatusLeft, 2*grace))), want: 1, wantAuto: true},
		{name: "a non-voter that left, within the grace", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: append(alives("n1", "n2", "n3"), peer("n4", "a", mesh.StatusLeft, time.Second)), want: 3, wantAuto: true},
		{name: "five voters, one drained and removed within the grace: 4 of 5", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4")),
			peers: append(alives("n1", "n2", "n3", "n4"), draining(peer("n5", "a", mesh.StatusLeft, time.Second))), want: 5, wantAuto: true},
		{name: "a voter that left without a drain: it keeps its seat and counts", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: append(two, peer("n3", "a", mesh.StatusLeft, 2*grace)), want: 3, wantAuto: true},
		{name: "alive gateways the leader has yet to add count: 1 of 3", cfg: conf(voter("n1")),
			peers: alives("n1", "n2", "n3"), want: 3, wantAuto: true},
		{name: "the leader (Self) counts whatever the mesh says of it", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{draining(peer("n1", "a", mesh.StatusLeft, 2*grace)), alive("n2", "a"), alive("n3", "a")}, want: 3, wantAuto: true},
		{name: "--raft-voters 3", cfg: conf(voter("n1"), voter("n2"), voter("n3")), peers: alives("n1", "n2", "n3"), voters: 3, want: 3},
		{name: "--raft-voters 5 of three gateways: 3", cfg: conf(voter("n1"), voter("n2"), voter("n3")), peers: alives("n1", "n2", "n3"), voters: 5, want: 3},
		{name: "--raft-voters 3, a gateway alone: 1", cfg: conf(voter("n1")), voters: 3, want: 1},
		{name: "--raft-voters 3, a drained voter removed within the grace: 2 of 3", cfg: conf(voter("n1"), voter("n2")),
			peers: append(two, draining(peer("n3", "a", mesh.StatusLeft, time.Second))), voters: 3, want: 3},
		{name: "--raft-voters 3, past the grace: 2 of 2", cfg: conf(voter("n1"), voter("n2")),
			peers: append(two, draining(peer("n3", "a", mesh.StatusLeft, 2*grace))), voters: 3, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := voters.Options{Voters: tt.voters, Self: "n1"}
			want, auto := voters.Shown(tt.cfg, tt.peers, planNow, o)
			if want != tt.want || auto != tt.wantAuto {
				t.Fatalf("Shown = %d, %v; want %d, %v", want, auto, tt.want, tt.wantAuto)
			}
			if planned, _, _ := voters.Planned(tt.cfg, tt.peers, planNow, o); tt.voters == 0 && planned != want {
				t.Fatalf("Shown = %d, the planner's count %d", want, planned)
			}
		})
	}
}
