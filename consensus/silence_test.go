package consensus

import (
	"errors"
	"testing"

	"github.com/meshgw/meshgw/test/testkit"
)

// TestLeaderSilence: a leader is never cut off; a node that hears from no leader (it waits to
// be added by a --join that never comes) is, once the silence passes the limit, and says so
// with a NoQuorumError that counts as ErrNoLeader.
func TestLeaderSilence(t *testing.T) {
	leader := startNode(t, Config{NodeID: "a", Ephemeral: true, BindAddr: "127.0.0.1:0"})
	waitReady(t, leader)
	if s, cut := leader.LeaderSilence(); cut || s != 0 {
		t.Errorf("the leader's LeaderSilence is %s, %t; want 0, false", s, cut)
	}
	if err := leader.CutOff(); err != nil {
		t.Errorf("the leader's CutOff: %v", err)
	}

	alone := startNode(t, Config{NodeID: "b", Ephemeral: true, BindAddr: "127.0.0.1:0", Join: []string{"127.0.0.1:1"}})
	if _, cut := alone.LeaderSilence(); cut {
		t.Fatal("a node that started a moment ago is cut off; want the limit to count from its start")
	}
	testkit.For(t, "the node without a leader to be cut off", func() bool { return alone.CutOff() != nil })
	err := alone.CutOff()
	var nq *NoQuorumError
	if !errors.As(err, &nq) || !errors.Is(err, ErrNoLeader) || nq.Silence < minSilenceLimit {
		t.Errorf("CutOff: %v (%#v); want a NoQuorumError of at least %s that is ErrNoLeader", err, nq, minSilenceLimit)
	}
}
