package mesh

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// profileConfig returns memberlist's configuration for a --mesh-profile. The profiles start
// from memberlist's own defaults; the changes in tuneLAN and tuneLocal were measured with
// `meshbench converge --peers 100` (docs/mesh.md has the figures). The goal: 100 peers that all
// join one seed at once see each other alive within 2 s on loopback. memberlist's defaults took
// 6.2-9.4 s (lan) and 59.2-59.7 s (local) on a 2-core machine.
//
// How news spreads in memberlist, which the settings below act on: a node that learns something
// (a join, a metadata update, a death) queues it and sends it RetransmitMult * ceil(log10(N+1))
// times (12 times at N = 100 with the multiplier 4), piggybacked on probes and in gossip packets
// of at most UDPBufferSize bytes, to GossipNodes random peers every GossipInterval; every peer
// that learns it does the same. A gossip round with an empty queue sends nothing. A full state
// exchange with one random peer over TCP (push/pull) every PushPullInterval, scaled by
// ceil(log2(N) - 5) + 1 above 32 nodes (x3 at 100), repairs whatever gossip missed. One alive
// message with a gateway's metadata is about 190 bytes, so a 1,400-byte packet holds 7.
func profileConfig(profile string) (*memberlist.Config, error) {
	switch profile {
	case "", ProfileLAN:
		c := memberlist.DefaultLANConfig()
		tuneLAN(c)
		return c, nil
	case ProfileWAN:
		return memberlist.DefaultWANConfig(), nil
	case ProfileLocal:
		c := memberlist.DefaultLocalConfig()
		tuneLocal(c)
		return c, nil
	}
	return nil, errFlag("--mesh-profile", "%q is not a profile (lan, wan or local)", profile)
}

// tuneLAN speeds up gossip on a LAN. Failure detection (probe interval and timeout, suspicion)
// and the packet size (1,400 bytes, under a 1,500-byte MTU) stay memberlist's.
//
//   - GossipInterval 200 ms -> 50 ms and GossipNodes 3 -> 4: a burst of news (a fleet
//     starting, a rolling restart) leaves a node 5.3 times as fast, so it no longer queues
//     behind the 7-messages-per-packet limit. It costs bandwidth only while there is news: at
//     most 4 packets of 1,400 bytes every 50 ms, 112 KB/s per node during a burst, nothing when
//     the queue is empty. 100 peers on loopback: 6.2-9.4 s -> a median of about 1.5 s.
//   - PushPullInterval 30 s -> 1 s (3 s at 100 nodes): with the faster gossip alone, one run in
//     three to ten still left a peer that had missed a join (or a metadata update) until the
//     next push/pull, 90 s away at 100 nodes. The repair must come well within the 5 s of
//     --fleet-ack-timeout, which waits on every peer's applied index in its metadata. A full
//     state at 100 nodes is about 19 KB, so each node sends and receives about 13 KB/s for it;
//     the bulletins push/pull carries must keep that state small (TestLocalStateBudget), or
//     this must be revisited.
func tuneLAN(c *memberlist.Config) {
	c.GossipInterval = 50 * time.Millisecond
	c.GossipNodes = 4
	c.PushPullInterval = time.Second
}

// tuneLocal makes memberlist's local (loopback) profile converge quickly. It is for peers on
// one host only (tests, demos, several gateways on one machine): its packets are larger than
// any real network's MTU.
//
//   - UDPBufferSize 1,400 -> 16 KiB: loopback carries 64 KiB datagrams, so one gossip packet
//     holds about 85 alive messages instead of 7, and a node sends its whole queue of news at
//     once instead of over dozens of rounds.
//   - RetransmitMult 2 -> 4 (LAN's value): with 2, each message went out only 6 times at 100
//     nodes; with large packets the queue then drained within a few rounds, and in most runs
//     some peer missed a join until a push/pull (45 s away) repaired it.
//   - PushPullInterval 15 s -> 1 s (3 s at 100 nodes): the repair of whatever gossip still
//     misses comes within seconds. A full state at 100 nodes is about 20 KB over loopback TCP.
//   - EnableCompression true -> false: LZW was a fifth of the CPU time of 100 nodes in one
//     process, and saves nothing on loopback.
//   - TCPTimeout 1 s -> 5 s: on a busy 2-core machine the seed of 99 simultaneous joins took
//     over a second to answer some of them, and those joins failed with an i/o timeout. A peer
//     that is gone refuses a loopback connection at once, so this does not slow failure
//     detection (probes have their own timeouts).
//
// 100 peers on loopback: 59.2-59.7 s -> 0.45-0.72 s (48 runs).
func tuneLocal(c *memberlist.Config) {
	c.UDPBufferSize = 16 << 10
	c.RetransmitMult = 4
	c.PushPullInterval = time.Second
	c.EnableCompression = false
	c.TCPTimeout = 5 * time.Second
}
