package consensus

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/voters/voterstest"
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
