package consensus

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// A follower cut off from the quorum (a partition of its region, say) still names its old
// leader for raft's heartbeat timeout (1-2 s, times --raft-multiplier), and then stands for
// election forever: a write sent to it would wait for a leader that does not answer, and
// end after seconds as an unknown outcome or no_leader. LeaderSilence lets it say at once
// that it is cut off instead.

// NoQuorumError says this node is cut off from the quorum, so a write sent now would wait for
// nothing: a follower or candidate that has heard from no raft leader for longer than a
// leader's heartbeats allow, or (found by the forwarder's probes, consensus/forward/quorum.go)
// a node, leader or follower, that reaches too few voters and has heard from no quorum since
// it last could. Nothing was written. errors.Is(err, ErrNoLeader) is true.
type NoQuorumError struct {
	// Silence is how long this node has heard from no leader (a leader: from no quorum).
	Silence time.Duration
	// Leading says this node still leads raft: its lease has not run out yet.
	Leading bool
	// Reached and Voters, when Voters is not 0, are how many voters (this node among them) the
	// last probe reached, and how many there are.
	Reached, Voters int
}

func (e *NoQuorumError) Error() string {
	heard := "heard from no raft leader"
	if e.Leading {
		heard = "led raft without an answer from a quorum of gateways"
	}
	msg := fmt.Sprintf("this gateway has %s for %s: it cannot reach a quorum of gateways (cut off from them?)",
		heard, e.Silence.Round(100*time.Millisecond))
	if e.Voters > 0 {
		msg += fmt.Sprintf("; it reaches %d of %d voters, itself included", e.Reached, e.Voters)
	}
	return msg
}

// Is makes errors.Is(err, ErrNoLeader) true.
func (e *NoQuorumError) Is(target error) bool { return target == ErrNoLeader }

// silence is what LeaderSilence measures from: the last time this node heard from a leader,
// led, or started, whichever is latest.
type silence struct {
	since atomic.Int64 // unix nanoseconds: Start, and each loss of leadership
	limit time.Duration
}

// silenceLimit is how long a follower may hear nothing from its leader before LeaderSilence
// calls it cut off: half raft's heartbeat timeout, and at least minSilenceLimit. A leader
// sends a heartbeat every tenth of that timeout (at random between one and two tenths), so the
// limit is two and a half to five heartbeats missed in a row, which a healthy link does not
// miss; and it is before raft itself gives the leader up (the whole timeout, or up to twice
// it).
//
// A follower cannot tell a partition from a leader that died or paused until a new leader
// reaches it: HasLeader (GET /status's quorum, --readiness-requires-quorum) says false from
// the limit on in both cases. The forwarder looks further before it fails a write at once: it
// probes the other voters (consensus/forward/quorum.go).
func silenceLimit(rc *raft.Config) time.Duration { return max(rc.HeartbeatTimeout/2, minSilenceLimit) }

// minSilenceLimit keeps the limit above a busy machine's scheduling hiccups when raft's
// timeouts are short (tests).
const minSilenceLimit = 500 * time.Millisecond

// mark restarts the silence at now: the node started, or stopped leading.
func (s *silence) mark(now time.Time) { s.since.Store(now.UnixNano()) }

// LeaderSilence reports how long this node has heard from no raft leader, and whether that is
// longer than a leader's heartbeats allow (cut off). A leader, a shut-down node, and a node
// that started or stopped leading less than that long ago are not cut off.
func (n *Node) LeaderSilence() (silence time.Duration, cutOff bool) {
	if n.closed.Load() || n.raft.State() == raft.Leader {
		return 0, false
	}
	from := time.Unix(0, n.silence.since.Load())
	if c := n.raft.LastContact(); c.After(from) {
		from = c
	}
	silence = time.Since(from)
	return silence, silence > n.silence.limit
}

// QuorumContact returns when this node last knew itself in contact with a quorum of voters: a
// follower's last contact with its leader (or when it started, or began or stopped leading, if
// later); a leader's latest time by which enough voters had answered its AppendEntries to
// make a quorum with it (or when it began to lead, if later). The forwarder holds it against
// its probes of the voters: a probe that fails after the last contact means cut off.
func (n *Node) QuorumContact() time.Time {
	from := time.Unix(0, n.silence.since.Load())
	if n.raft.State() != raft.Leader {
		if c := n.raft.LastContact(); c.After(from) {
			return c
		}
		return from
	}
	var voters []raft.ServerID
	for _, s := range n.raft.GetConfiguration().Configuration().Servers {
		if s.Suffrage == raft.Voter && s.ID != raft.ServerID(n.cfg.NodeID) {
			voters = append(voters, s.ID)
		}
	}
	if c := n.hb.quorumContact(voters, time.Now()); c.After(from) {
		return c
	}
	return from
}

// CutOff returns a *NoQuorumError when LeaderSilence says this node is cut off, else nil.
func (n *Node) CutOff() error {
	if s, cut := n.LeaderSilence(); cut {
		return &NoQuorumError{Silence: s}
	}
	return nil
}

// UntilCutOff returns a context derived from ctx that ends, with cutOff's error as its cause,
// once cutOff returns one: it is asked at once, then every poll while the context lasts. A
// wait on a leader that a gateway cut off from the quorum cannot reach (a forwarded write, a
// read barrier) ends with it when the gateway finds the cut. stop ends the watch and waits for
// it; call it once the wait is over.
func UntilCutOff(ctx context.Context, poll time.Duration, cutOff func() error) (wctx context.Context, stop func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	if err := cutOff(); err != nil {
		cancel(err)
		return wctx, func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(poll)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
				if err := cutOff(); err != nil {
					cancel(err)
					return
				}
			}
		}
	}()
	return wctx, func() {
		cancel(nil)
		<-done
	}
}
