package voters

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/mesh"
)

// Defaults of Options and Config (DESIGN.md sections 3 and 11).
const (
	// DefaultVoters is --raft-voters: 0, the leader chooses the count by the fleet's size
	// (AutoCount).
	DefaultVoters = 0
	// DefaultDeadVoterGrace is --dead-voter-grace: how long a voter may be dead before it is
	// removed and its seat given to a live non-voter.
	DefaultDeadVoterGrace = 60 * time.Second
)

// Peer is one gateway as the mesh sees it: the input of Plan. Foreign peers (another
// cluster id) must not be passed.
type Peer struct {
	// ID is the node id, the same as its raft server id.
	ID string
	// RaftAddress is the host:port of the peer's raft transport, from its node metadata.
	RaftAddress string
	// Region is the peer's --region; "" is a region like any other.
	Region string
	// Status is the peer's mesh status. Only alive, dead and left count, and mesh.StatusUnknown
	// for a server of the configuration that the mesh does not list: the membership lists a peer
	// marked draining that the mesh does not list with it (rule 4), and the Reconciler adds every
	// other server of the configuration that the mesh does not list (rules 6, 7 and 12). Any
	// other (suspect, or the zero value) is never added, promoted or removed for.
	Status mesh.Status
	// Since is when the peer entered Status; for mesh.StatusUnknown, when the leader first found
	// the server missing from the mesh in its term. An unknown peer that is not draining and
	// has no Since is left alone (rule 12).
	Since time.Time
	// Incarnation is the id of the peer's state directory, for the log line of rule 5.
	Incarnation string
	// Rejoining says the peer's raft state is new and no leader has confirmed that it caught up
	// (a first join, or a state directory that was lost): it is not a live voter (rule 13), a
	// voter seat it holds is taken back (rule 5), and it is not promoted (rule 8).
	Rejoining bool
	// Unreachable says the leader's raft has had no answer from the peer since it leads or
	// since the peer's last failed heartbeat (a peer just added has not answered yet): it is not
	// promoted (rule 8), as Consul's autopilot promotes only a server in contact. One answer
	// lifts it. A seat given to a peer that cannot be reached holds nothing, and a voter set of
	// which one cannot vote loses its quorum at the next fault.
	Unreachable bool
	// Pending says, of an Unreachable peer, that the leader's raft has not failed to reach it
	// either: it was just added, and answers (or fails) within a heartbeat interval. Rule 8
	// waits for it when it is the non-voter it would promote, so that the order of the first
	// answers does not decide which region gets the seat.
	Pending bool
	// Draining says an operator drains the peer (DESIGN.md section 5, Handoff): it is not
	// promoted, its voter seat goes to a peer that is not draining (rules 8 and 10), it leaves the
	// configuration once it is gone from the mesh (rule 4), and a draining leader hands the
	// leadership over (rule 9).
	Draining bool
}

// Options are the knobs of Plan. The zero value of each field is its default.
type Options struct {
	// Voters is --raft-voters, the number of voters to keep. Zero (the default) chooses it by
	// the fleet's size (AutoCount of the planner's fleet).
	Voters int
	// DeadVoterGrace is --dead-voter-grace. Zero means DefaultDeadVoterGrace.
	DeadVoterGrace time.Duration
	// Self is the leader's own id: never demoted, removed or updated (the node updates its own
	// address when it gains leadership).
	Self string
}

func (o Options) withDefaults() Options {
	if o.Voters < 0 {
		o.Voters = DefaultVoters
	}
	if o.DeadVoterGrace <= 0 {
		o.DeadVoterGrace = DefaultDeadVoterGrace
	}
	return o
}

// ChangeKind is one kind of raft configuration change.
type ChangeKind uint8

// The kinds of Change. There is no "add voter": a new server always joins as a non-voter, so
// that it catches up with the log before it counts towards the quorum.
const (
	// ChangeAddNonvoter adds a server as a non-voter (raft's AddNonvoter).
	ChangeAddNonvoter ChangeKind = iota + 1
	// ChangePromote makes a non-voter a voter (raft's AddVoter with its address).
	ChangePromote
	// ChangeDemote makes a voter a non-voter (raft's DemoteVoter).
	ChangeDemote
	// ChangeRemove removes a server, voter or not (raft's RemoveServer).
	ChangeRemove
	// ChangeUpdateAddress gives a server a new address and keeps its suffrage (raft's AddVoter
	// for a voter, AddNonvoter for a non-voter).
	ChangeUpdateAddress
	// ChangeTransferLeadership hands the leadership to a voter (raft's
	// LeadershipTransferToServer): the leader is draining.
	ChangeTransferLeadership
)

// String returns the kind as the log line names it.
func (k ChangeKind) String() string {
	switch k {
	case ChangeAddNonvoter:
		return "add-nonvoter"
	case ChangePromote:
		return "promote"
	case ChangeDemote:
		return "demote"
	case ChangeRemove:
		return "remove"
	case ChangeUpdateAddress:
		return "update-address"
	case ChangeTransferLeadership:
		return "transfer-leadership"
	}
	return "unknown"
}

// Change is one step of a plan.
type Change struct {
	Kind ChangeKind
	// ID is the server's id.
	ID string
	// Address is the server's raft address, for ChangeAddNonvoter, ChangePromote and
	// ChangeUpdateAddress.
	Address string
	// Voter says, for ChangeUpdateAddress, that the server is a voter and stays one.
	Voter bool
	// Reason says why, for the log line.
	Reason string
}

// Plan decides how the leader changes the raft configuration cfg so that it matches
// the mesh's view of the peers at time now. It is pure: it reads no clock and calls no raft.
//
// Rules, numbered in the order they are read here; those that change a voter (3, 5, 6 and 8 to
// 11) come in the order in which a plan picks its one voter change (rule 14):
//
//  1. An alive peer with a raft address that is not in the configuration joins as a non-voter,
//     draining or not: a draining one catches up and sees that it is drained (it was cut off
//     while it was removed, or it is a gateway started again whose old mark the leader is about
//     to clear), and rule 8 never promotes it while it drains.
//  2. A server whose alive peer publishes another raft address (a restart on a new address keeps
//     the id) is updated in place, keeping its suffrage.
//  3. A non-voter that left is removed at once, and so is a voter that left while draining: a
//     drain hands the seat over first (rule 10), and a drained gateway does not come back to it. A
//     voter that left without a drain is one that died, from when it left: rules 6 and 7 decide,
//     and rule 13 counts it as not live; once the mesh forgets it, it is one the mesh does not
//     list, and rules 6 and 7 still decide (rule 12). A plain SIGTERM leaves the mesh so that the
//     peers list the gateway as left at once, but it may be back on its state directory (a
//     restart, a rolling restart, a fleet stopped one gateway at a time and started again), and
//     removing its seat at once would leave a configuration that the gateways coming back cannot
//     elect in. A non-voter holds no seat: rule 1 adds it again once it is back alive, and rule 8
//     promotes it while voters are wanted.
//  4. A draining non-voter that is dead, or that the mesh does not list (Status
//     mesh.StatusUnknown), is removed at once too, without rule 6's grace: a drained gateway
//     leaves, and one whose leave the mesh did not hear (cut off as it left) or forgot (a
//     leader that joined since) is gone all the same. Its drain is done then (the leader clears
//     its mark); if it was only cut off, rule 1 adds it again once it is back, and it finishes.
//  5. A voter whose alive peer is rejoining is removed: it came back with a new incarnation,
//     having lost what it acknowledged, so its seat counts for nothing. Rule 1 then adds it
//     again as a non-voter, and rule 8 promotes it once it caught up, as etcd's member remove
//     and member add.
//  6. A voter down for longer than DeadVoterGrace (exactly the grace is not longer) is removed,
//     the one down longest first (by Since), then the lowest id; rule 8 then gives its seat to a
//     live non-voter. Down is dead, gone by a leave without a drain (rule 3), or missing from
//     the mesh (mesh.StatusUnknown, not draining, with a Since: rule 12). Suspect voters are
//     left alone: a suspicion may be refuted, and a dead peer is only dead after one. A
//     non-voter down for longer than the grace is removed.
//  7. With the automatic count (rule 15), a down voter that is not draining (dead, gone by a
//     leave without a drain, or missing from the mesh) stays past the grace while exactly 3
//     voters that are not draining hold seats and no non-voter could take its seat (rule 8's
//     choice): 2 live voters of 2 tolerate no more faults than 2 of 3, so the removal would
//     gain nothing and cost the seat it comes back to. From 4 or 5 voters it goes, since the
//     voters left (then demoted to an odd count by rule 11) tolerate as many faults or more.
//  8. While there are fewer voters that are not draining than wanted (rule 15), an alive
//     non-voter already in the configuration that is neither rejoining, draining nor
//     unreachable (no answer to the leader's raft yet) is promoted: the one whose region holds
//     the fewest voters, then the lowest id. Peers added by this plan wait for the next pass, so
//     that raft has started to catch them up. When that choice, made among the peers not
//     unreachable or Pending, is Pending, nothing is promoted until it answers or fails. Regions
//     are those of the voters the mesh lists (Self's from its own entry in peers). Draining
//     peers are never promoted.
//  9. When Self is draining and an alive voter that is neither draining nor rejoining exists
//     (the lowest id), the leadership is handed to it, after any promotion: the next leader
//     demotes Self by rule 10.
//  10. Once no promotion is planned and at least one voter is not draining, a draining voter
//     other than Self is demoted, the lowest id first: its seat went to a peer that is not
//     draining. It leaves the configuration when it leaves the mesh (rule 3), a voter still or
//     not.
//  11. While there are more voters than wanted (rule 15), one is demoted: not alive first, then
//     the one whose region holds the most voters, then the highest id.
//  12. Self is never demoted, removed or updated. A server the mesh does not list (raft's own
//     members, e.g. mid-bootstrap or under a leader whose mesh has not caught up, one the mesh
//     forgot, or one that did not come back when the fleet was started again) is never updated,
//     promoted, or demoted by rule 11, and its region is not counted (rule 8). Unless it is
//     draining (rule 4, and 10 for a voter), it is left alone for DeadVoterGrace after the leader
//     first found it missing (Since, which the Reconciler clocks from its term's first pass that
//     finds it missing, so a new leader starts at its own start of leadership), and past the grace
//     it is down, as a dead one, for rules 6 and 7. A server with no Peer, or an unknown one with
//     no Since, is left alone.
//  13. Quorum guard: a change of the voter set (rules 3, 5 to 8, 10 and 11 on voters) is planned
//     only if the live voters of the resulting configuration (Self and alive peers that are not
//     rejoining; suspect, dead, left and unknown ones do not count) form its quorum. Removing a
//     voter that left or died never needs more live voters than keeping it (quorum(V-1) <=
//     quorum(V), and it was not live), so the guard refuses it only when quorum is lost already;
//     promoting needs the same.
//  14. One voter change per plan, the first of rules 3, 5, 6, 8, 9, 10 and 11 that applies:
//     every single-server change is its own raft configuration entry and the next is decided on
//     the configuration it left. Changes to non-voters and addresses cannot affect the quorum
//     and are all planned at once. A plan is therefore bounded by the number of servers and
//     peers plus one.
//  15. The voters wanted are Voters when it is set. When it is zero they are AutoCount of the
//     fleet, the gateways that belong to it even while they are down. A server of the
//     configuration counts whatever the mesh says of it (suspect, dead, unknown to the mesh,
//     rejoining, draining, and a voter that left without a drain, rule 3), Self always, and a peer
//     not in the configuration when it is alive with a raft address. A server the mesh does not
//     list therefore counts while it is in the configuration, and stops counting once rule 6
//     removed it. A non-voter or a draining voter that left, or a draining gateway that is gone
//     (rule 4), still counts for DeadVoterGrace after it went, as does a peer no longer in the
//     configuration that left, died or went suspect within the grace: a rolling restart, a
//     supervisor that restarts a drained gateway at once, or a gateway whose disk was wiped comes
//     back to an unchanged count. A kill, a pause, a partition, a plain SIGTERM or a lost disk
//     therefore never lowers the count, and no voter is demoted for being unreachable a while:
//     riding that out is what raft's quorum is for. The count goes down only once gateways stayed
//     gone past the grace (a drain, a non-voter's leave, or a removal by rules 6 and 7, of a
//     server dead, gone by a leave without a drain, or missing from the mesh), and once 3 voters
//     hold seats it stays at 3 or more until then, since the voters are servers the fleet counts.
//
// The plan lists address updates first (they restore replication), then the voter change,
// then removals of non-voters, then new non-voters, each group by id. It is deterministic (the
// order of cfg and peers does not matter; of two peers with one id the later Since wins) and
// idempotent: re-planning after applying a plan converges in at most one pass per voter change
// to an empty plan.
func Plan(cfg raft.Configuration, peers []Peer, now time.Time, o Options) []Change {
	p := newPlanner(cfg, peers, now, o.withDefaults())
	var plan []Change
	plan = append(plan, p.addressUpdates()...)
	if c, ok := p.voterChange(); ok {
		plan = append(plan, c)
	}
	plan = append(plan, p.nonvoterRemovals()...)
	return append(plan, p.newcomers()...)
}

// seat is one server of the configuration with what the mesh says of it.
type seat struct {
	id, address string
	voter       bool
	peer        Peer
	known       bool // the mesh lists the server
	self        bool
}

// live reports whether the seat counts towards the quorum guard.
func (s seat) live() bool {
	return s.self || (s.known && s.peer.Status == mesh.StatusAlive && !s.peer.Rejoining)
}

// amnesiac reports whether s is a voter seat held by an alive peer that is rejoining (rule 5).
func (s seat) amnesiac() bool {
	return s.voter && !s.self && s.known && s.peer.Status == mesh.StatusAlive && s.peer.Rejoining
}

type planner struct {
	o     Options
	now   time.Time
	seats []seat // by id
	peers []Peer // by id, one per id
	inCfg map[string]bool
	// fleet is rule 15's count of gateways; want the voters wanted.
	fleet, want int
}

func newPlanner(cfg raft.Configuration, peers []Peer, now time.Time, o Options) *planner {
	p := &planner{o: o, now: now, inCfg: make(map[string]bool, len(cfg.Servers))}
	byID := make(map[string]Peer, len(peers))
	for _, peer := range peers {
		if old, ok := byID[peer.ID]; peer.ID != "" && (!ok || peer.Since.After(old.Since)) {
			byID[peer.ID] = peer
		}
	}
	for _, peer := range byID {
		p.peers = append(p.peers, peer)
	}
	slices.SortFunc(p.peers, func(a, b Peer) int { return cmp.Compare(a.ID, b.ID) })
	for _, s := range cfg.Servers {
		id := string(s.ID)
		peer, known := byID[id]
		p.inCfg[id] = true
		p.seats = append(p.seats, seat{
			id: id, address: string(s.Address), voter: s.Suffrage == raft.Voter,
			peer: peer, known: known, self: id == o.Self,
		})
	}
	slices.SortFunc(p.seats, func(a, b seat) int { return cmp.Compare(a.id, b.id) })
	p.fleet, p.want = p.countFleet(), o.Voters
	if p.auto() {
		p.want = AutoCount(p.fleet)
	}
	return p
}

// down reports whether s's peer is dead, left without a drain (rule 3: for a voter seat, one
// that died), or is missing from the mesh with a time since (rule 12), not draining.
func (s seat) down() bool {
	if !s.known {
		return false
	}
	switch s.peer.Status {
	case mesh.StatusDead:
		return true
	case mesh.StatusLeft:
		return !s.peer.Draining
	case mesh.StatusUnknown:
		return !s.peer.Draining && !s.peer.Since.IsZero()
	}
	return false
}

// listed reports whether the mesh lists s's peer (rule 12: an unknown one is not).
func (s seat) listed() bool { return s.known && s.peer.Status != mesh.StatusUnknown }

// downTooLong reports whether s is down for longer than the grace (rule 6). A non-voter that left
// is rule 3's before it is this.
func (p *planner) downTooLong(s seat) bool {
	return s.down() && p.now.Sub(s.peer.Since) > p.o.DeadVoterGrace
}

// left reports whether s's peer left the mesh.
func (s seat) left() bool { return s.known && s.peer.Status == mesh.StatusLeft }

// departed reports whether s's peer left for good as rule 3 sees it: a non-voter that left, or
// a voter that left while draining.
func (s seat) departed() bool { return s.left() && (!s.voter || s.peer.Draining) }

// drainedAway reports whether s is a draining seat whose peer is dead or unknown to the mesh
// (rule 4; one that left is rule 3's).
func (s seat) drainedAway() bool {
	return s.draining() && (s.peer.Status == mesh.StatusDead || s.peer.Status == mesh.StatusUnknown)
}

// awayReason says how a drainedAway seat's peer is gone, for the log line.
func (s seat) awayReason() string {
	if s.peer.Status == mesh.StatusUnknown {
		return "the mesh does not list it"
	}
	return "dead"
}

// addressUpdates is rule 2.
func (p *planner) addressUpdates() []Change {
	var out []Change
	for _, s := range p.seats {
		if s.self || !s.known || s.peer.Status != mesh.StatusAlive || s.peer.RaftAddress == "" || s.peer.RaftAddress == s.address {
			continue
		}
		out = append(out, Change{Kind: ChangeUpdateAddress, ID: s.id, Address: s.peer.RaftAddress, Voter: s.voter,
			Reason: fmt.Sprintf("the peer's raft address changed from %s", s.address)})
	}
	return out
}

// nonvoterRemovals is rules 3, 4 and 6 for non-voters.
func (p *planner) nonvoterRemovals() []Change {
	var out []Change
	for _, s := range p.seats {
		switch {
		case s.self || s.voter:
		case s.left():
			out = append(out, Change{Kind: ChangeRemove, ID: s.id, Reason: "the non-voter left the mesh"})
		case p.downTooLong(s):
			out = append(out, Change{Kind: ChangeRemove, ID: s.id, Reason: p.downReason("non-voter", s)})
		case s.drainedAway():
			out = append(out, Change{Kind: ChangeRemove, ID: s.id, Reason: fmt.Sprintf(
				"the non-voter is draining and %s: a drained gateway does not come back to its seat", s.awayReason())})
		}
	}
	return out
}

// newcomers is rule 1.
func (p *planner) newcomers() []Change {
	var out []Change
	for _, peer := range p.peers {
		if peer.ID == p.o.Self || p.inCfg[peer.ID] || peer.Status != mesh.StatusAlive || peer.RaftAddress == "" {
			continue
		}
		reason := "an alive peer is not in the raft configuration"
		if peer.Draining {
			reason = "an alive peer marked draining is not in the raft configuration: it catches up to finish its drain, or to learn that it was started again since"
		}
		out = append(out, Change{Kind: ChangeAddNonvoter, ID: peer.ID, Address: peer.RaftAddress, Reason: reason})
	}
	return out
}

// downReason says why rule 6 removes s, for the log line.
func (p *planner) downReason(what string, s seat) string {
	switch s.peer.Status {
	case mesh.StatusLeft:
		return fmt.Sprintf("the %s left the mesh without a drain %s ago, longer than the %s grace; it counts as dead",
			what, p.now.Sub(s.peer.Since), p.o.DeadVoterGrace)
	case mesh.StatusUnknown:
		return fmt.Sprintf("the mesh has not listed the %s for %s since this leader found it missing, longer than the %s grace; it counts as dead",
			what, p.now.Sub(s.peer.Since), p.o.DeadVoterGrace)
	}
	return fmt.Sprintf("the %s has been dead for %s, longer than the %s grace", what, p.now.Sub(s.peer.Since), p.o.DeadVoterGrace)
}

// voterChange is rules 3 and 5 to 11 for voters, under the quorum guard of rule 13, one at a
// time (rule 14).
func (p *planner) voterChange() (Change, bool) {
	voters, live, staying := 0, 0, 0
	for _, s := range p.seats {
		if s.voter {
			voters++
			if s.live() {
				live++
			}
			if !s.draining() {
				staying++
			}
		}
	}
	// Removing a voter that left or died: it is not live, so only the count drops.
	if voters-1 >= 1 && holdsQuorum(voters-1, live) {
		if s, ok := p.firstVoter(seat.departed); ok {
			return Change{Kind: ChangeRemove, ID: s.id, Reason: "the voter left the mesh while draining"}, true
		}
		if s, ok := p.firstVoter(seat.amnesiac); ok {
			return Change{Kind: ChangeRemove, ID: s.id, Reason: fmt.Sprintf(
				"the voter came back with a new incarnation %s (its raft state is new, so it may lack entries it acknowledged); it rejoins as a non-voter",
				s.peer.Incarnation)}, true
		}
		if s, ok := p.longestDownVoter(); ok && p.mayRemoveDown(s, staying) {
			return Change{Kind: ChangeRemove, ID: s.id, Reason: p.downReason("voter", s)}, true
		}
	}
	regions := p.voterRegions()
	if staying < p.want && holdsQuorum(voters+1, live+1) {
		if s, ok := p.promotable(regions); ok {
			return Change{Kind: ChangePromote, ID: s.id, Address: s.peer.RaftAddress,
				Reason: fmt.Sprintf("%d voters that are not draining of %s; region %q holds %d", staying, p.wanted(), s.peer.Region, regions[s.peer.Region])}, true
		}
	}
	if c, ok := p.transferLeadership(); ok {
		return c, true
	}
	if staying >= 1 && voters-1 >= 1 {
		if s, ok := p.firstVoter(seat.draining); ok && holdsQuorum(voters-1, live-boolInt(s.live())) {
			return Change{Kind: ChangeDemote, ID: s.id, Reason: "the voter is draining; its seat went to a peer that is not"}, true
		}
	}
	if voters > p.want {
		if s, ok := p.demotable(regions); ok && holdsQuorum(voters-1, live-boolInt(s.live())) {
			return Change{Kind: ChangeDemote, ID: s.id,
				Reason: fmt.Sprintf("%d voters of %s", voters, p.wanted())}, true
		}
	}
	return Change{}, false
}

// transferLeadership is rule 9: a draining Self hands the leadership to the live voter of lowest id that
// is not draining.
func (p *planner) transferLeadership() (Change, bool) {
	self, ok := p.self()
	if !ok || !self.draining() {
		return Change{}, false
	}
	to, ok := p.firstVoter(func(s seat) bool { return s.live() && !s.draining() })
	if !ok {
		return Change{}, false
	}
	return Change{Kind: ChangeTransferLeadership, ID: to.id, Address: to.address,
		Reason: "this leader is draining"}, true
}

// self returns Self's seat.
func (p *planner) self() (seat, bool) {
	for _, s := range p.seats {
		if s.self {
			return s, true
		}
	}
	return seat{}, false
}

// draining reports whether the mesh says the seat's peer is draining.
func (s seat) draining() bool { return s.known && s.peer.Draining }

// holdsQuorum reports whether live voters form a quorum of a configuration with voters voters.
func holdsQuorum(voters, live int) bool { return voters > 0 && live >= voters/2+1 }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// firstVoter returns the voter of lowest id, other than Self, for which match holds.
func (p *planner) firstVoter(match func(seat) bool) (seat, bool) {
	for _, s := range p.seats {
		if s.voter && !s.self && match(s) {
			return s, true
		}
	}
	return seat{}, false
}

// longestDownVoter returns the voter down (dead, left without a drain, or missing from the
// mesh) past the grace for the longest time, then lowest id.
func (p *planner) longestDownVoter() (seat, bool) {
	var best seat
	found := false
	for _, s := range p.seats {
		if s.voter && !s.self && p.downTooLong(s) && (!found || s.peer.Since.Before(best.peer.Since)) {
			best, found = s, true
		}
	}
	return best, found
}

// voterRegions counts the voters per region, of the voters the mesh lists.
func (p *planner) voterRegions() map[string]int {
	regions := make(map[string]int)
	for _, s := range p.seats {
		if s.voter && s.listed() {
			regions[s.peer.Region]++
		}
	}
	return regions
}

// promotable is rule 8's choice: an alive non-voter the leader reaches, whose region holds the
// fewest voters, then the lowest id; none while that choice is a peer not reached yet that has
// not failed either (Pending).
func (p *planner) promotable(regions map[string]int) (seat, bool) {
	var best seat
	found := false
	for _, s := range p.seats {
		if s.voter || s.self || !s.known || s.peer.Status != mesh.StatusAlive || s.peer.RaftAddress == "" || s.peer.Rejoining ||
			s.peer.Draining || (s.peer.Unreachable && !s.peer.Pending) {
			continue
		}
		if !found || regions[s.peer.Region] < regions[best.peer.Region] {
			best, found = s, true // seats are by id, so a tie keeps the lower id
		}
	}
	if found && best.peer.Pending {
		return seat{}, false // its first answer comes within a heartbeat interval
	}
	return best, found
}

// demotable is rule 11's choice among the voters the mesh lists, Self excepted: not alive
// first, then the most crowded region, then the highest id.
func (p *planner) demotable(regions map[string]int) (seat, bool) {
	var best seat
	found := false
	for _, s := range p.seats {
		if !s.voter || s.self || !s.listed() {
			continue
		}
		if !found || demoteBefore(s, best, regions) {
			best, found = s, true
		}
	}
	return best, found
}

// demoteBefore reports whether a is a better voter to demote than b.
func demoteBefore(a, b seat, regions map[string]int) bool {
	if a.live() != b.live() {
		return !a.live()
	}
	if a.draining() != b.draining() {
		return a.draining()
	}
	if ra, rb := regions[a.peer.Region], regions[b.peer.Region]; ra != rb {
		return ra > rb
	}
	return a.id > b.id
}
