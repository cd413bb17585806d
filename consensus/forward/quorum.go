package forward

import (
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Telling a partition from a paused leader.
//
// A follower that has heard from no leader for a while (consensus.Node.CutOff) may be cut off
// from the quorum, or its leader may have died or paused while the other voters elect a new
// one. A write should fail at once in the first case and wait for the new leader in the second.
// The forwarder tells them apart by asking the network: it opens a TCP connection to the RPC
// listener of every other voter (and closes it at once; the kernel answers for a paused
// process too). When this node and the voters it reaches form a quorum, a leader will come and
// the write waits as ever; when they do not, the node is cut off and the write fails at once.
// A probe takes at most probeTimeout, and its verdict is kept for probeFor, so that a burst of
// writes costs one probe.

const (
	// probeTimeout bounds one probe's connections, times the raft multiplier: above a round
	// trip on a LAN (and, times 3, on a WAN of up to 250 ms), below the second a cut-off
	// write may take.
	probeTimeout = 250 * time.Millisecond
	// probeFor is how long a probe's verdict stands.
	probeFor = time.Second
)

// configured is what a Node may tell of the raft configuration (*consensus.Node does).
type configured interface {
	Configuration() (raft.Configuration, uint64, error)
}

// quorumProbe caches the last verdict of reachQuorum.
type quorumProbe struct {
	mu    sync.Mutex
	at    time.Time
	reach bool
	known bool
}

// reachQuorum reports whether this node and the voters whose RPC listeners accept a TCP
// connection within the probe's timeout make a quorum of the raft configuration; known is
// false when it cannot tell (no configuration). A voter without a known RPC address counts as
// unreachable: a cut-off gateway's mesh forgets the others after a while, and the node is no
// less cut off for it.
func (f *Forwarder) reachQuorum() (reach, known bool) {
	f.probe.mu.Lock()
	defer f.probe.mu.Unlock()
	if !f.probe.at.IsZero() && time.Since(f.probe.at) < probeFor {
		return f.probe.reach, f.probe.known
	}
	reach, known = f.probeQuorum()
	f.probe.at, f.probe.reach, f.probe.known = time.Now(), reach, known
	return reach, known
}

func (f *Forwarder) probeQuorum() (reach, known bool) {
	c, ok := f.node.(configured)
	if !ok {
		return false, false
	}
	cfg, _, err := c.Configuration()
	if err != nil {
		return false, false
	}
	var addrs []string
	voters, self := 0, false
	for _, s := range cfg.Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if string(s.ID) == f.node.ID() {
			self = true
			continue
		}
		if addr, ok := f.o.ResolveRPC(string(s.ID)); ok && addr != "" {
			addrs = append(addrs, addr)
		}
	}
	if voters == 0 {
		return false, false
	}
	reached := 0
	if self {
		reached = 1
	}
	results := make(chan bool, len(addrs))
	for _, a := range addrs {
		go func() {
			conn, err := net.DialTimeout("tcp", a, f.probeTimeout)
			if err == nil {
				_ = conn.Close()
			}
			results <- err == nil
		}()
	}
	for range addrs {
		if <-results {
			reached++
		}
	}
	return reached > voters/2, true
}
