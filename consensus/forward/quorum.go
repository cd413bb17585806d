package forward

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus"
)

// Telling a partition from a paused leader, within a second of the partition.
//
// A node cut off from the quorum (a partition of its region, say) should fail a write at once;
// one whose leader died or paused while the other voters elect a new one should let the write
// wait for that leader. The forwarder tells them apart by asking the network: every probeEvery
// it opens a TCP connection to the RPC listener of every other voter (and closes it at once;
// the kernel answers for a paused process too). When this node and the voters it reaches form
// a quorum, a leader will come; when they do not, and this node has not heard from a quorum
// since the probe began (its leader's heartbeats, or, leading, its followers' answers:
// consensus.Node.QuorumContact), it is cut off and a write fails at once with a
// *consensus.NoQuorumError.
//
// Raft's own view comes too late for that over a WAN: a follower calls itself cut off after
// half the heartbeat timeout (1.5 s with --mesh-profile wan), and a leader keeps leading for its
// lease (1.5-3 s). The probe finds the cut within probeEvery plus its timeout: about 0.6 s over
// links of 50 ms one way.
//
// Its cost is one TCP connection to each other voter every probeEvery: with 5 voters, 20 a
// second from each gateway. A connection that the gRPC server sees closed before its preface is
// not logged (grpc-go leaves such probes alone, as load balancers make them).

const (
	// probeEvery is how often the forwarder probes the voters.
	probeEvery = 200 * time.Millisecond
	// probeTimeout bounds one probe's connections, times the raft multiplier: above a round
	// trip on a LAN (and, times 3, on a WAN of up to 250 ms). It is the most a probe waits; a
	// probe that knows the round trip to the voters (the connection that completed the quorum,
	// averaged over rounds) waits probeRTTs of it, and at least minProbeTimeout (a busy
	// machine's scheduling).
	probeTimeout    = 250 * time.Millisecond
	minProbeTimeout = 200 * time.Millisecond
	probeRTTs       = 4
)

// configured is what a Node may tell of the raft configuration (*consensus.Node does).
type configured interface {
	Configuration() (raft.Configuration, uint64, error)
}

// contactNode is what a Node may tell of its last contact with a quorum
// (consensus.Node.QuorumContact). Without it, a failed probe counts only once the node's CutOff
// says it is silent.
type contactNode interface{ QuorumContact() time.Time }

// probeRound is one probe of the voters.
type probeRound struct {
	start           time.Time
	reach, known    bool // known is false when it could not tell (no configuration)
	reached, voters int  // this node among them
	// quorumRTT is how long the connection took that completed the quorum (the others' are
	// not needed); 0 when none did.
	quorumRTT time.Duration
}

// quorumProbe holds the last round, and the round trip the next one's timeout follows.
type quorumProbe struct {
	mu   sync.Mutex
	last probeRound
	rtt  time.Duration // quorumRTT averaged over the rounds that reached a quorum; 0: unknown
}

// watchQuorum probes the voters every probeEvery until the forwarder shuts down.
func (f *Forwarder) watchQuorum() {
	defer close(f.watched)
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-f.done:
			return
		case <-tick.C:
			f.probeNow()
		}
	}
}

// probeNow runs one round and keeps it.
func (f *Forwarder) probeNow() probeRound {
	f.probe.mu.Lock()
	timeout := f.probeTimeout
	if rtt := f.probe.rtt; rtt > 0 {
		timeout = min(max(probeRTTs*rtt, minProbeTimeout), f.probeTimeout)
	}
	f.probe.mu.Unlock()
	r := f.probeQuorum(timeout)
	f.probe.mu.Lock()
	defer f.probe.mu.Unlock()
	if r.start.After(f.probe.last.start) {
		f.probe.last = r
	}
	if r.reach && r.quorumRTT > 0 {
		// A moving average (a quarter of the new round): one slow round on a busy machine
		// does not stretch the next timeouts much.
		if f.probe.rtt == 0 {
			f.probe.rtt = r.quorumRTT
		} else {
			f.probe.rtt += (r.quorumRTT - f.probe.rtt) / 4
		}
	}
	return r
}

// lastRound returns the last probe round when it is recent enough to stand for now: while the
// next round waits for its connections (up to probeTimeout each), and one more.
func (f *Forwarder) lastRound() (probeRound, bool) {
	f.probe.mu.Lock()
	defer f.probe.mu.Unlock()
	r := f.probe.last
	return r, !r.start.IsZero() && time.Since(r.start) < 2*(probeEvery+f.probeTimeout)
}

// CutOff is a *consensus.NoQuorumError when this node is cut off from the quorum (cutOff),
// else nil: what its probes of the voters found, for those who would otherwise wait on a leader
// (the admin API's read barrier).
func (f *Forwarder) CutOff() error { return f.cutOff() }

// cutOff is a *consensus.NoQuorumError when this node is cut off from the quorum, else nil: the
// last probe of the voters did not reach a quorum, and the node has not heard from one since
// the probe began. A write then fails at once (nothing was written) rather than wait for a
// leader none can reach. A node that reaches a quorum, or cannot tell, waits for the leader
// they will elect.
func (f *Forwarder) cutOff() error {
	r, fresh := f.lastRound()
	if !fresh {
		// The watch is behind (a stalled machine): probe now, but only when raft's own
		// silence says there is something to look for.
		if c, ok := f.node.(cutOffNode); !ok || c.CutOff() == nil {
			return nil
		}
		r = f.probeNow()
	}
	if !r.known || r.reach {
		return nil
	}
	nq := &consensus.NoQuorumError{Reached: r.reached, Voters: r.voters}
	if c, ok := f.node.(contactNode); ok {
		contact := c.QuorumContact()
		if !contact.Before(r.start) {
			return nil // heard from a quorum since the probe began
		}
		nq.Silence = time.Since(contact)
	} else {
		c, ok := f.node.(cutOffNode)
		if !ok {
			return nil
		}
		var silent *consensus.NoQuorumError
		if !errors.As(c.CutOff(), &silent) {
			return nil
		}
		nq.Silence = silent.Silence
	}
	id, _ := f.node.Leader()
	nq.Leading = id == f.node.ID()
	return nq
}

// probeQuorum reports whether this node and the voters whose RPC listeners accept a TCP
// connection within timeout make a quorum of the raft configuration; known is false when it
// cannot tell (no configuration). A voter without a known RPC address counts as unreachable: a
// cut-off gateway's mesh forgets the others after a while, and the node is no less cut off for
// it.
func (f *Forwarder) probeQuorum(timeout time.Duration) probeRound {
	r := probeRound{start: time.Now()}
	c, ok := f.node.(configured)
	if !ok {
		return r
	}
	cfg, _, err := c.Configuration()
	if err != nil {
		return r
	}
	var addrs []string
	self := false
	for _, s := range cfg.Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		r.voters++
		if string(s.ID) == f.node.ID() {
			self = true
			continue
		}
		if addr, ok := f.o.ResolveRPC(string(s.ID)); ok && addr != "" {
			addrs = append(addrs, addr)
		}
	}
	if r.voters == 0 {
		return r
	}
	if self {
		r.reached = 1
	}
	type result struct {
		ok   bool
		took time.Duration
	}
	need := r.voters/2 + 1 - r.reached // answers that complete the quorum
	results := make(chan result, len(addrs))
	for _, a := range addrs {
		go func() {
			t0 := time.Now()
			conn, err := net.DialTimeout("tcp", a, timeout)
			if err == nil {
				_ = conn.Close()
			}
			results <- result{err == nil, time.Since(t0)}
		}()
	}
	for range addrs {
		if res := <-results; res.ok {
			r.reached++
			if need--; need == 0 {
				r.quorumRTT = res.took
			}
		}
	}
	r.known, r.reach = true, r.reached > r.voters/2
	return r
}
