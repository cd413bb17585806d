package voters

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/mesh"
)

// The automatic voter count (Plan rules 7 and 15).
const (
	// MaxAutoCount is the most voters the automatic count chooses: 5 tolerate two faults, as
	// many as Consul and etcd recommend for a production cluster; every voter more adds a
	// replication to every commit's quorum and tolerates only one more fault per two voters.
	MaxAutoCount = 5
	// autoVoterFloor is the count below which rule 7 keeps a down voter's seat (dead, left
	// without a drain, or missing from the mesh past the grace) when no non-voter can take it.
	autoVoterFloor = 3
)

// AutoCount returns the voters the leader keeps in a fleet of gateways when --raft-voters is
// 0: the largest odd number at most gateways and at most MaxAutoCount, and 1 for fewer than 3
// gateways (1 for 1 or 2, 3 for 3 or 4, 5 from 5 on).
//
// An even count tolerates no more faults than the odd count below it (2 of 2 none, as 1 of
// 1; 4 tolerate one, as 3) and needs one more voter for every commit. Two gateways therefore
// keep one voter: two voters would stop every write when either is lost, where one voter stops
// them only when that one is; the other gateway's copy of the log is the same either way, and
// every admin write already waits for every live gateway to apply it (fleet-acknowledged
// writes), so nothing acknowledged rests on the one voter's disk alone.
func AutoCount(gateways int) int {
	switch {
	case gateways >= MaxAutoCount:
		return MaxAutoCount
	case gateways >= 3:
		return 3
	default:
		return 1
	}
}

// Wanted returns the voters the leader works towards on configuration cfg with the
// mesh's view peers at time now: o.Voters when it is positive (--raft-voters), else AutoCount
// of the fleet (Plan rule 15, which reads o.DeadVoterGrace). Any gateway can call it
// to show what its leader plans.
func Wanted(cfg raft.Configuration, peers []Peer, now time.Time, o Options) int {
	return newPlanner(cfg, peers, now, o.withDefaults()).want
}

// Shown returns the voters wanted as GET /mesh/raft, GET /status and meshctl raft show them
// ("voters 2 of 3 (auto)"), and whether that is the automatic count: the planner's own count
// on configuration cfg with the mesh's view peers at time now (rule 15), so that a gateway that
// left or drained counts for o.DeadVoterGrace on the display as it does for the leader. With
// --raft-voters N (o.Voters) it is N, at most the gateways of rule 15's fleet, which are all the
// leader can seat. o.Self should be the leader's id: its planner counts it whatever the mesh
// says of it.
func Shown(cfg raft.Configuration, peers []Peer, now time.Time, o Options) (want int, auto bool) {
	p := newPlanner(cfg, peers, now, o.withDefaults())
	if p.auto() {
		return p.want, true
	}
	return min(p.want, p.fleet), false
}

// auto reports whether the voters wanted are the automatic count.
func (p *planner) auto() bool { return p.o.Voters <= 0 }

// countFleet is rule 15's fleet. A server of the configuration counts whatever the mesh says of it
// (suspect, dead, unknown or missing, rejoining, draining, a voter that left without a drain),
// Self always, unless it departed (rule 3: a non-voter or a draining voter that left) or was
// drained away longer than the grace ago; a peer not in the configuration counts when it is alive
// with a raft address (rule 1 adds it), or when it went (left, died, was cut off) at most the
// grace ago, since it may be back at once: a rolling restart, or a supervisor that restarts a
// drained gateway.
func (p *planner) countFleet() int {
	n := 0
	for _, s := range p.seats {
		if s.self || !s.known || !(s.departed() || s.drainedAway()) || p.recent(s.peer) {
			n++
		}
	}
	for _, peer := range p.peers {
		switch {
		case p.inCfg[peer.ID]:
		case peer.Status == mesh.StatusAlive:
			n += boolInt(peer.RaftAddress != "")
		case peer.Status != mesh.StatusUnknown:
			n += boolInt(p.recent(peer))
		}
	}
	return n
}

// recent reports whether peer entered its status at most the grace ago.
func (p *planner) recent(peer Peer) bool {
	return !peer.Since.IsZero() && p.now.Sub(peer.Since) <= p.o.DeadVoterGrace
}

// mayRemoveDown is rule 7: whether the down voter s (dead, left without a drain, or missing
// from the mesh) may be removed when staying voters that are not draining hold seats.
func (p *planner) mayRemoveDown(s seat, staying int) bool {
	if !p.auto() || s.draining() || staying != autoVoterFloor {
		return true
	}
	_, replaced := p.promotable(p.voterRegions())
	return replaced
}

// wanted says the voters wanted for a log line: "3 wanted", or "3 wanted (auto, 4 gateways)".
func (p *planner) wanted() string {
	if p.auto() {
		return fmt.Sprintf("%d wanted (auto, %d gateways)", p.want, p.fleet)
	}
	return fmt.Sprintf("%d wanted", p.want)
}
