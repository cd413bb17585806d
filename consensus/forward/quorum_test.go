package forward

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/consensustest"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/test/testkit"
)

// Raft's timings in these tests: consensustest's, times wanMultiplier, as --mesh-profile wan runs
// them (times 3). A follower's silence limit is then half the heartbeat timeout, 750 ms, and a
// leader keeps its lease for 1.5 s.
const wanMultiplier = 5

func wanTimings(_ int, c *consensus.Config) {
	c.RaftMultiplier = wanMultiplier // the forwarder's waits scale by it
	c.Tune = func(rc *raft.Config) {
		consensustest.ClusterRaft(rc)
		rc.HeartbeatTimeout *= wanMultiplier
		rc.ElectionTimeout *= wanMultiplier
		rc.LeaderLeaseTimeout *= wanMultiplier
	}
}

// cutOffAll isolates node i's raft traffic and makes every other voter's RPC listener refuse
// it, as a partition of its region does.
func (c *fwdCluster) cutOffAll(t *testing.T, i int) {
	t.Helper()
	c.Isolate(i)
	dead := closedAddr(t)
	self := c.Nodes[i].ID()
	c.setOverride(func(id string) (string, bool, bool) { return dead, true, id != self })
}

// TestCutOffFollowerFailsBeforeItsSilenceLimit: a follower cut off from the quorum answers a
// write with a NoQuorumError as soon as its background probe of the voters fails and no leader
// was heard since, not once raft's silence limit has passed (half the heartbeat timeout, 1.5 s
// with --mesh-profile wan, and a probe after it: 2.3 s over the WAN test bed). A region's
// writes fail within 1 s of its cut.
func TestCutOffFollowerFailsBeforeItsSilenceLimit(t *testing.T) {
	c := startForwardCluster(t, 3, Options{}, wanTimings)
	lead := c.ready(t)
	from := consensustest.Others(3, lead)[0]
	c.cutOffAll(t, from)
	cut := time.Now()
	var (
		err  error
		took time.Duration
	)
	for took < 2*time.Second {
		_, err = c.fwd[from].Apply(testCtx(t), fsm.Register{Spec: consensustest.Spec(t, 8021), Owner: "n1"})
		took = time.Since(cut)
		if errors.Is(err, consensus.ErrNoLeader) {
			break
		}
	}
	var nq *consensus.NoQuorumError
	if !errors.As(err, &nq) || errors.Is(err, consensus.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "cannot reach a quorum") {
		t.Fatalf("a write through a follower cut off from the quorum: %v; want a NoQuorumError saying it cannot reach a quorum", err)
	}
	if _, silent := c.Nodes[from].LeaderSilence(); silent || took >= time.Second {
		t.Errorf("the cut-off follower answered no quorum %v after the cut (past raft's silence limit: %t); want within 1 s, before the limit",
			took.Round(time.Millisecond), silent)
	}
	t.Logf("answered after %v: %v", took.Round(time.Millisecond), err)
}

// TestCutOffLeaderFailsWhileItStillLeads: a leader cut off from its followers keeps leading
// until its lease runs out (1.5 s here, and up to twice that), and a write it took meanwhile
// used to wait for that and more. Now the write it holds answers outcome unknown (it is in the
// leader's log) as soon as the probe fails, and the next write is refused at once with a
// NoQuorumError saying it cannot reach a quorum: both while the node still leads.
func TestCutOffLeaderFailsWhileItStillLeads(t *testing.T) {
	c := startForwardCluster(t, 3, Options{}, wanTimings)
	lead := c.ready(t)
	c.cutOffAll(t, lead)
	cut := time.Now()
	_, err := c.fwd[lead].Apply(testCtx(t), fsm.Register{Spec: consensustest.Spec(t, 8022), Owner: "n1"})
	first := time.Since(cut)
	if !errors.Is(err, consensus.ErrOutcomeUnknown) || errors.Is(err, consensus.ErrNoLeader) || !strings.Contains(err.Error(), "cut off") {
		t.Fatalf("a write held by a leader cut off from its followers: %v; want outcome unknown naming the cut", err)
	}
	_, err = c.fwd[lead].Apply(testCtx(t), fsm.Register{Spec: consensustest.Spec(t, 8023), Owner: "n1"})
	second := time.Since(cut)
	var nq *consensus.NoQuorumError
	if !errors.As(err, &nq) || errors.Is(err, consensus.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "cannot reach a quorum") {
		t.Fatalf("a write to a leader cut off from its followers: %v; want a NoQuorumError saying it cannot reach a quorum", err)
	}
	if leads := c.Nodes[lead].IsLeader(); !leads || second >= time.Second {
		t.Errorf("the cut-off leader answered %v and %v after the cut (still leading: %t); want within 1 s, while it still leads",
			first.Round(time.Millisecond), second.Round(time.Millisecond), leads)
	}
	t.Logf("answered after %v and %v (%v)", first.Round(time.Millisecond), second.Round(time.Millisecond), nq)
}

// TestCutOffWhileConnectingToTheLeader: a write sent just as its gateway is cut off, with no
// connection to the leader yet, used to wait for that connection (the dial timeout, 3 s over a
// WAN) before it found the cut. It now fails once the probe finds it, with a NoQuorumError:
// nothing was sent.
func TestCutOffWhileConnectingToTheLeader(t *testing.T) {
	c := startForwardCluster(t, 3, Options{}, wanTimings)
	lead := c.ready(t)
	from := consensustest.Others(3, lead)[0]
	c.Isolate(from)
	hole := testkit.UnansweredAddr(t)
	self := c.Nodes[from].ID()
	c.setOverride(func(id string) (string, bool, bool) { return hole, true, id != self })
	start := time.Now()
	_, err := c.fwd[from].Apply(testCtx(t), fsm.Register{Spec: consensustest.Spec(t, 8024), Owner: "n1"})
	took := time.Since(start)
	var nq *consensus.NoQuorumError
	if !errors.As(err, &nq) || errors.Is(err, consensus.ErrOutcomeUnknown) {
		t.Fatalf("a write connecting to the leader when its gateway was cut off: %v; want a NoQuorumError", err)
	}
	if dial := c.fwd[from].o.DialTimeout; took > dial/2 {
		t.Errorf("it answered after %v; want once the probe finds the cut, not after the dial timeout (%v)", took.Round(time.Millisecond), dial)
	}
	if n := c.calls[lead].Load(); n != 0 {
		t.Errorf("the leader received %d forwarded writes; want none", n)
	}
	t.Logf("answered after %v: %v", took.Round(time.Millisecond), err)
}
