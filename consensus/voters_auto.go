package consensus

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/mesh"
)

// The automatic voter count (PlanMembership rules 4b and 11).
const (
	// MaxAutoVoters is the most voters the automatic count chooses: 5 tolerate two faults, as
	// many as Consul and etcd recommend for a production cluster; every voter more adds a
	// replication to every commit's quorum and tolerates only one more fault per two voters.
	MaxAutoVoters = 5
	// autoVoterFloor is the count below which rule 4b keeps a dead voter's seat when no
	// non-voter can take it.
	autoVoterFloor = 3
)

// AutoVoters returns the voters the leader keeps in a fleet of gateways when --raft-voters is
// 0: the largest odd number at most gateways and at most MaxAutoVoters, and 1 for fewer than 3
// gateways (1 for 1 or 2, 3 for 3 or 4, 5 from 5 on).
//
// An even count tolerates no more faults than the odd count below it (2 of 2 none, as 1 of
// 1; 4 tolerate one, as 3) and needs one more voter for every commit. Two gateways therefore
// keep one voter: two voters would stop every write when either is lost, where one voter stops
// them only when that one is; the other gateway's copy of the log is the same either way, and
// every admin write already waits for every live gateway to apply it (fleet-acknowledged
// writes), so nothing acknowledged rests on the one voter's disk alone.
func AutoVoters(gateways int) int {
	switch {
	case gateways >= MaxAutoVoters:
		return MaxAutoVoters
	case gateways >= 3:
		return 3
	default:
		return 1
	}
}

// VotersWanted returns the voters the leader works towards on configuration cfg with the
// mesh's view peers: voters when it is positive (--raft-voters), else AutoVoters of the fleet
// (PlanMembership rule 11). Any gateway can call it to show what its leader plans.
func VotersWanted(cfg raft.Configuration, peers []Peer, voters int) int {
	return newPlanner(cfg, peers, time.Time{}, VoterOptions{Voters: voters}.withDefaults()).want
}

// auto reports whether the voters wanted are the automatic count.
func (p *planner) auto() bool { return p.o.Voters <= 0 }

// countFleet is rule 11's fleet: the servers of the configuration and the alive peers with a
// raft address that are not in it yet, less those that left or drain (Self only when it
// drains). A server counts whatever the mesh says of it otherwise (suspect, dead, unknown, rejoining): the
// configuration is the fleet's durable membership, and only a leave, a drain or a removal past
// the dead grace take a gateway out of it.
func (p *planner) countFleet() int {
	n := 0
	for _, s := range p.seats {
		if !s.draining() && (s.self || !s.left()) { // Self runs, whatever the mesh last said
			n++
		}
	}
	for _, peer := range p.peers {
		if !p.inCfg[peer.ID] && peer.Status == mesh.StatusAlive && peer.RaftAddress != "" && !peer.Draining {
			n++
		}
	}
	return n
}

// mayRemoveDead is rule 4b: whether the dead voter s may be removed when staying voters that
// are not draining hold seats.
func (p *planner) mayRemoveDead(s seat, staying int) bool {
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
