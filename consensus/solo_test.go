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
