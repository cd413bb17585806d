package consensus

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestRaftMultiplier(t *testing.T) {
	tests := []struct {
		name    string
		m       int
		wantErr bool
		want    [3]time.Duration // heartbeat, election, leader lease
	}{
		{name: "zero: raft's defaults", m: 0, want: [3]time.Duration{time.Second, time.Second, 500 * time.Millisecond}},
		{name: "one: raft's defaults", m: 1, want: [3]time.Duration{time.Second, time.Second, 500 * time.Millisecond}},
		{name: "three: a WAN", m: 3, want: [3]time.Duration{3 * time.Second, 3 * time.Second, 1500 * time.Millisecond}},
		{name: "the most", m: MaxRaftMultiplier, want: [3]time.Duration{10 * time.Second, 10 * time.Second, 5 * time.Second}},
		{name: "above the most", m: MaxRaftMultiplier + 1, wantErr: true},
		{name: "negative", m: -1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Config{NodeID: "a", Ephemeral: true, RaftMultiplier: tt.m}.withDefaults()
			if (err != nil) != tt.wantErr {
				t.Fatalf("withDefaults: err %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			rc := raft.DefaultConfig()
			scaleTimings(rc, c.RaftMultiplier)
			got := [3]time.Duration{rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout}
			if got != tt.want || rc.CommitTimeout != raft.DefaultConfig().CommitTimeout {
				t.Errorf("timings %v, commit %s; want %v and raft's commit timeout", got, rc.CommitTimeout, tt.want)
			}
		})
	}
}

// TestRaftMultiplierReachesRaft checks that a started node runs with the scaled timings.
func TestRaftMultiplierReachesRaft(t *testing.T) {
	n := startNode(t, Config{NodeID: "a", Ephemeral: true, BindAddr: "127.0.0.1:0", RaftMultiplier: 3, Tune: func(*raft.Config) {}})
	if got := n.raft.ReloadableConfig().HeartbeatTimeout; got != 3*time.Second {
		t.Errorf("raft's HeartbeatTimeout is %s; want 3s", got)
	}
	if got := n.raft.ReloadableConfig().ElectionTimeout; got != 3*time.Second {
		t.Errorf("raft's ElectionTimeout is %s; want 3s", got)
	}
}
