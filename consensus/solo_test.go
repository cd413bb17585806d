package consensus

import (
	"testing"

	"github.com/hashicorp/raft"
)

func TestSoleVoter(t *testing.T) {
	tests := []struct {
		name string
		cfg  raft.Configuration
		want bool
	}{
		{name: "no configuration (waiting to join)", cfg: conf()},
		{name: "a bootstrapped mesh of one", cfg: conf(voter("n1")), want: true},
		{name: "one voter and non-voters", cfg: conf(voter("n1"), nonvoter("n2"), nonvoter("n3")), want: true},
		{name: "another voter", cfg: conf(voter("n1"), voter("n2"))},
		{name: "a non-voter whose only voter is another", cfg: conf(voter("n2"), nonvoter("n1"))},
		{name: "a non-voter alone", cfg: conf(nonvoter("n1"))},
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
	three := []Server{{ID: "n1"}, {ID: "n2"}, {ID: "n3"}}
	tests := []struct {
		name    string
		servers []Server
		voters  int
		want    int
	}{
		{name: "three gateways, --raft-voters 3", servers: three, voters: 3, want: 3},
		{name: "the default", servers: three, want: DefaultRaftVoters},
		{name: "a gateway alone", servers: three[:1], voters: 3, want: 1},
		{name: "five wanted of three", servers: three, voters: 5, want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Info{Servers: tt.servers}).WithVotersWanted(tt.voters).VotersWanted; got != tt.want {
				t.Fatalf("VotersWanted = %d; want %d", got, tt.want)
			}
		})
	}
}
