package consensus

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/test/testkit"
)

// TestDialOfAnUnansweredPeerEndsSoon: raft's stream layer gives up a connect whose SYNs go
// unanswered after raftConnectTimeout, not after the transport's 10 s, so a leader that dialed a
// follower while it was cut off dials again right after the partition heals (docs/chaos.md: a
// follower saw no leader for up to 7 s after a partition of 2 s).
func TestDialOfAnUnansweredPeerEndsSoon(t *testing.T) {
	addr := testkit.UnansweredAddr(t)
	s := &guardedStream{guard: plainGuard()}
	start := time.Now()
	c, err := s.Dial(raft.ServerAddress(addr), 10*time.Second)
	if err == nil {
		c.Close()
		t.Fatal("the dial of a peer whose queue is full connected")
	}
	if took := time.Since(start); took > raftConnectTimeout+time.Second {
		t.Errorf("the dial gave up after %v, want about %v", took, raftConnectTimeout)
	}
}

func TestConnectTimeout(t *testing.T) {
	for _, tt := range []struct{ in, want time.Duration }{
		{10 * time.Second, raftConnectTimeout}, {200 * time.Millisecond, 200 * time.Millisecond}, {0, raftConnectTimeout},
	} {
		if got := connectTimeout(tt.in); got != tt.want {
			t.Errorf("connectTimeout(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
