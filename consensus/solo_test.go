package consensus

import (
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/consensus/voters/voterstest"
	"github.com/meshgw/meshgw/mesh"
)

func TestSoleVoter(t *testing.T) {
	tests := []struct {
		name string
		cfg  raft.Configuration
		want bool
	}{
		{name: "no configuration (waiting to join)", cfg: voterstest.Conf()},
		{name: "a bootstrapped mesh of one", cfg: voterstest.Conf(voterstest.Voter("n1")), want: true},
		{name: "one voter and non-voters", cfg: voterstest.Conf(voterstest.Voter("n1"), voterstest.Nonvoter("n2"), voterstest.Nonvoter("n3")), want: true},
		{name: "another voter", cfg: voterstest.Conf(voterstest.Voter("n1"), voterstest.Voter("n2"))},
		{name: "a non-voter whose only voter is another", cfg: voterstest.Conf(voterstest.Voter("n2"), voterstest.Nonvoter("n1"))},
		{name: "a non-voter alone", cfg: voterstest.Conf(voterstest.Nonvoter("n1"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := soleVoter(tt.cfg, "n1"); got != tt.want {
				t.Fatalf("soleVoter = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestInfoWithVotersWanted(t *testing.T) {
	three := []Server{{ID: "n1", Suffrage: "voter"}, {ID: "n2", Suffrage: "nonvoter"}, {ID: "n3", Suffrage: "nonvoter"}}
	five := append(slices.Clone(three), Server{ID: "n4", Suffrage: "voter"}, Server{ID: "n5", Suffrage: "voter"})
	tests := []struct {
		name     string
		servers  []Server
		peers    []voters.Peer
		voters   int
		want     int
		wantAuto bool
	}{
		{name: "three gateways, --raft-voters 3", servers: three, voters: 3, want: 3},
		{name: "a gateway alone", servers: three[:1], voters: 3, want: 1},
		{name: "five wanted of three", servers: three, voters: 5, want: 3},
		{name: "auto: three servers", servers: three, want: 3, wantAuto: true},
		{name: "auto: five servers", servers: five, want: 5, wantAuto: true},
		{name: "auto: five servers, two of them dead", servers: five, want: 5, wantAuto: true,
			peers: []voters.Peer{voterstest.Alive("n1", ""), voterstest.Alive("n2", ""), voterstest.Alive("n3", ""), voterstest.Peer("n4", "", mesh.StatusDead, time.Minute), voterstest.Peer("n5", "", mesh.StatusDead, time.Minute)}},
		{name: "auto: five servers, one draining", servers: five, want: 5, wantAuto: true,
			peers: []voters.Peer{voterstest.Alive("n1", ""), voterstest.Alive("n2", ""), voterstest.Alive("n3", ""), voterstest.Alive("n4", ""), voterstest.Draining(voterstest.Alive("n5", ""))}},
		{name: "auto: four servers, one left past the grace", servers: five[:4], want: 3, wantAuto: true,
			peers: []voters.Peer{voterstest.Alive("n1", ""), voterstest.Alive("n2", ""), voterstest.Alive("n3", ""), voterstest.Alive("n4", ""), voterstest.Peer("n5", "", mesh.StatusLeft, 2*voters.DefaultDeadVoterGrace)}},
		{name: "auto: two servers", servers: three[:2], want: 1, wantAuto: true},
		{name: "auto: at most the servers listed", servers: three[:1], want: 1, wantAuto: true,
			peers: []voters.Peer{voterstest.Alive("n1", ""), voterstest.Alive("n2", ""), voterstest.Alive("n3", "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := (Info{Servers: tt.servers}).WithVotersWanted(tt.peers, voterstest.Now, voters.Options{Voters: tt.voters})
			if got.VotersWanted != tt.want || got.VotersAuto != tt.wantAuto {
				t.Fatalf("VotersWanted = %d, VotersAuto = %v; want %d, %v", got.VotersWanted, got.VotersAuto, tt.want, tt.wantAuto)
			}
		})
	}
}
