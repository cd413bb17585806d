package voters_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/consensus/voters/voterstest"
	"github.com/meshgw/meshgw/mesh"
)

// The builders of voterstest, short for the tables.
var (
	planNow  = voterstest.Now
	voter    = voterstest.Voter
	nonvoter = voterstest.Nonvoter
	conf     = voterstest.Conf
	peer     = voterstest.Peer
	alive    = voterstest.Alive
	draining = voterstest.Draining
)

func moved(p voters.Peer, addr string) voters.Peer { p.RaftAddress = addr; return p }

// rejoining is p with a new, not yet caught-up raft state.
func rejoining(p voters.Peer) voters.Peer { p.Rejoining, p.Incarnation = true, "inc-"+p.ID; return p }

// unreachable is p when the leader's raft heartbeats to it fail.
func unreachable(p voters.Peer) voters.Peer { p.Unreachable = true; return p }

// unlisted is a server of the configuration that the mesh does not list, missing since ago
// before planNow as the leader's Reconciler clocks it (rules 6, 7 and 12).
func unlisted(id string, ago time.Duration) voters.Peer {
	return voters.Peer{ID: id, Status: mesh.StatusUnknown, Since: planNow.Add(-ago)}
}

// pending is p just added: the leader's raft has neither reached it nor failed to yet.
func pending(p voters.Peer) voters.Peer { p.Unreachable, p.Pending = true, true; return p }

// ignoreReason compares plans without their free-text reasons.
var ignoreReason = cmpopts.IgnoreFields(voters.Change{}, "Reason")

func add(id string) voters.Change {
	return voters.Change{Kind: voters.ChangeAddNonvoter, ID: id, Address: "a-" + id}
}
func promote(id string) voters.Change {
	return voters.Change{Kind: voters.ChangePromote, ID: id, Address: "a-" + id}
}
func demote(id string) voters.Change { return voters.Change{Kind: voters.ChangeDemote, ID: id} }
func remove(id string) voters.Change { return voters.Change{Kind: voters.ChangeRemove, ID: id} }

func TestPlan(t *testing.T) {
	grace := voters.DefaultDeadVoterGrace
	tests := []struct {
		name  string
		cfg   raft.Configuration
		peers []voters.Peer
		opts  voters.Options // Self defaults to n1
		want  []voters.Change
	}{
		{name: "a mesh of one", cfg: conf(voter("n1")), peers: []voters.Peer{alive("n1", "a")}},
		{name: "no membership yet", cfg: conf(voter("n1"))},

		// Draining peers (rules 1, 8, 9, 10): blue drains, green takes the seats.
		{name: "an alive draining peer out of the configuration is added, to finish its drain", cfg: conf(voter("n1")),
			peers: []voters.Peer{alive("n1", "a"), draining(alive("n2", "a"))},
			want:  []voters.Change{add("n2")}},
		{name: "draining voters: a peer that stays is promoted first", opts: voters.Options{Self: "b1"},
			cfg: conf(voter("b1"), voter("b2"), voter("b3"), nonvoter("g1"), nonvoter("g2"), nonvoter("g3")),
			peers: []voters.Peer{draining(alive("b1", "a")), draining(alive("b2", "a")), draining(alive("b3", "a")),
				alive("g1", "a"), alive("g2", "a"), alive("g3", "a")},
			want: []voters.Change{promote("g1")}},
		{name: "a draining peer is never promoted", opts: voters.Options{Self: "b1"},
			cfg:   conf(voter("b1"), nonvoter("b2"), nonvoter("g1")),
			peers: []voters.Peer{draining(alive("b1", "a")), draining(alive("b2", "a")), alive("g1", "a")},
			want:  []voters.Change{promote("g1")}},
		{name: "a draining leader hands over once the seats are filled", opts: voters.Options{Self: "b1"},
			cfg: conf(voter("b1"), voter("b2"), voter("b3"), voter("g1"), voter("g2"), voter("g3")),
			peers: []voters.Peer{draining(alive("b1", "a")), draining(alive("b2", "a")), draining(alive("b3", "a")),
				alive("g1", "a"), alive("g2", "a"), alive("g3", "a")},
			want: []voters.Change{{Kind: voters.ChangeTransferLeadership, ID: "g1", Address: "a-g1"}}},
		{name: "the new leader demotes the draining voters", opts: voters.Options{Self: "g1"},
			cfg: conf(voter("b1"), voter("b2"), voter("b3"), voter("g1"), voter("g2"), voter("g3")),
			peers: []voters.Peer{draining(alive("b1", "a")), draining(alive("b2", "a")), draining(alive("b3", "a")),
				alive("g1", "a"), alive("g2", "a"), alive("g3", "a")},
			want: []voters.Change{demote("b1")}},
		{name: "a drained non-voter leaves the configuration when it leaves the mesh", opts: voters.Options{Self: "g1"},
			cfg:   conf(nonvoter("b1"), voter("g1"), voter("g2"), voter("g3")),
			peers: []voters.Peer{draining(peer("b1", "a", mesh.StatusLeft, 0)), alive("g1", "a"), alive("g2", "a"), alive("g3", "a")},
			want:  []voters.Change{remove("b1")}},
		// Rule 4: a drained non-voter whose leave the mesh did not hear, or that it forgot.
		{name: "a dead draining non-voter is removed at once", opts: voters.Options{Self: "g1"},
			cfg:   conf(nonvoter("b1"), voter("g1"), voter("g2"), voter("g3")),
			peers: []voters.Peer{draining(peer("b1", "a", mesh.StatusDead, 0)), alive("g1", "a"), alive("g2", "a"), alive("g3", "a")},
			want:  []voters.Change{remove("b1")}},
		{name: "a draining non-voter the mesh does not list is removed", opts: voters.Options{Self: "g1"},
			cfg:   conf(nonvoter("b1"), voter("g1"), voter("g2"), voter("g3")),
			peers: []voters.Peer{draining(voters.Peer{ID: "b1", Status: mesh.StatusUnknown}), alive("g1", "a"), alive("g2", "a"), alive("g3", "a")},
			want:  []voters.Change{remove("b1")}},
		{name: "a dead non-voter that is not draining waits for the grace", opts: voters.Options{Self: "g1"},
			cfg:   conf(nonvoter("b1"), voter("g1"), voter("g2"), voter("g3")),
			peers: []voters.Peer{peer("b1", "a", mesh.StatusDead, 0), alive("g1", "a"), alive("g2", "a"), alive("g3", "a")}},
		{name: "a draining voter the mesh does not list is demoted first", opts: voters.Options{Self: "g1"},
			cfg:   conf(voter("b1"), voter("g1"), voter("g2"), voter("g3")),
			peers: []voters.Peer{draining(voters.Peer{ID: "b1", Status: mesh.StatusUnknown}), alive("g1", "a"), alive("g2", "a"), alive("g3", "a")},
			want:  []voters.Change{demote("b1")}},
		{name: "a server the mesh does not list and that is not draining is left alone", opts: voters.Options{Self: "g1"},
			cfg:   conf(nonvoter("b1"), voter("g1"), voter("g2"), voter("g3")),
			peers: []voters.Peer{alive("g1", "a"), alive("g2", "a"), alive("g3", "a")}},
		{name: "a draining leader alone keeps leading", cfg: conf(voter("n1"), nonvoter("n2")),
			peers: []voters.Peer{draining(alive("n1", "a")), draining(alive("n2", "a"))}},

		// Rule 1: newcomers.
		{name: "alive peers join as non-voters", cfg: conf(voter("n1")),
			peers: []voters.Peer{alive("n3", "b"), alive("n1", "a"), alive("n2", "a")},
			want:  []voters.Change{add("n2"), add("n3")}},
		{name: "only alive peers join", cfg: conf(voter("n1")),
			peers: []voters.Peer{peer("n2", "a", mesh.StatusSuspect, 0), peer("n3", "a", mesh.StatusDead, 0), peer("n4", "a", mesh.StatusLeft, 0), {ID: "n5", RaftAddress: "a-n5"}}},
		{name: "a peer without a raft address waits", cfg: conf(voter("n1")),
			peers: []voters.Peer{moved(alive("n2", "a"), "")}},
		{name: "a peer without an id is ignored", cfg: conf(voter("n1")),
			peers: []voters.Peer{moved(alive("", "a"), "a-x")}},

		// Rule 2: address changes keep the suffrage.
		{name: "a voter's new address", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), moved(alive("n2", "a"), "new-n2"), alive("n3", "a")},
			want:  []voters.Change{{Kind: voters.ChangeUpdateAddress, ID: "n2", Address: "new-n2", Voter: true}}},
		{name: "a non-voter's new address", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), moved(alive("n4", "a"), "new-n4")},
			want:  []voters.Change{{Kind: voters.ChangeUpdateAddress, ID: "n4", Address: "new-n4"}}},
		{name: "self's address is the node's own business", cfg: conf(voter("n1")),
			peers: []voters.Peer{moved(alive("n1", "a"), "new-n1")}},
		{name: "only an alive peer's address counts", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), moved(peer("n2", "a", mesh.StatusSuspect, 0), "new-n2"), alive("n3", "a")}},

		// Rule 5: a voter that forgot its state gives its seat back and rejoins as a non-voter.
		{name: "a rejoining voter is removed", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), rejoining(alive("n2", "a")), alive("n3", "a")},
			want:  []voters.Change{remove("n2")}},
		{name: "then it joins as a non-voter", cfg: conf(voter("n1"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), rejoining(alive("n2", "a")), alive("n3", "a")},
			want:  []voters.Change{add("n2")}},
		{name: "and is not promoted while rejoining", cfg: conf(voter("n1"), nonvoter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), rejoining(alive("n2", "a")), alive("n3", "a")}},
		{name: "once caught up it is promoted", cfg: conf(voter("n1"), nonvoter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a")},
			want:  []voters.Change{promote("n2")}},
		{name: "a rejoining voter is not live: no removal without quorum", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), rejoining(alive("n2", "a")), peer("n3", "a", mesh.StatusSuspect, 0), peer("n4", "a", mesh.StatusSuspect, 0), alive("n5", "a")}},
		{name: "a rejoining non-voter stays", cfg: conf(voter("n1"), nonvoter("n2")),
			peers: []voters.Peer{alive("n1", "a"), rejoining(alive("n2", "a"))}},
		{name: "a rejoining voter that is not alive is left to rules 3 and 6", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), rejoining(peer("n2", "a", mesh.StatusSuspect, 0)), alive("n3", "a")}},

		// Rule 3: a non-voter that left and a draining voter that left go at once.
		{name: "a left non-voter", cfg: conf(voter("n1"), nonvoter("n2")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusLeft, 0)},
			want:  []voters.Change{remove("n2")}},
		{name: "a draining voter that left", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), draining(peer("n2", "a", mesh.StatusLeft, 0)), alive("n3", "a")},
			want:  []voters.Change{remove("n2")}},
		{name: "two draining voters that left: one per pass, lowest id", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n5", "a"), draining(peer("n4", "a", mesh.StatusLeft, 0)), draining(peer("n3", "a", mesh.StatusLeft, 0))},
			want:  []voters.Change{remove("n3")}},
		{name: "self never leaves by plan", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{peer("n1", "a", mesh.StatusLeft, 0), alive("n2", "a"), alive("n3", "a")}},
		{name: "a draining voter that left, with no quorum left, stays", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), draining(peer("n2", "a", mesh.StatusLeft, 0)), peer("n3", "a", mesh.StatusDead, 0)}},

		// Rules 3, 6 and 7: a voter that left without a drain (a plain SIGTERM, a rolling
		// restart, a whole fleet stopped one at a time) is one that died.
		{name: "3 voters: a voter that left without a drain keeps its seat for the grace", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusLeft, grace), alive("n3", "a"), alive("n4", "a")}},
		{name: "3 voters: past the grace it goes, and the non-voter takes its seat", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusLeft, grace+time.Nanosecond), alive("n3", "a"), alive("n4", "a")},
			want:  []voters.Change{remove("n2")}},
		{name: "3 voters: past the grace with nobody to take its seat, it stays (rule 7)", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusLeft, 2*grace), alive("n3", "a")}},
		{name: "3 voters: two left without a drain, then the leader stopped; the next leader keeps all three", opts: voters.Options{Self: "n2"},
			cfg:   conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{peer("n1", "a", mesh.StatusLeft, 2*grace), alive("n2", "a"), alive("n3", "a")}},
		{name: "3 voters, --raft-voters 3: past the grace it goes without rule 7", cfg: conf(voter("n1"), voter("n2"), voter("n3")), opts: voters.Options{Voters: 3},
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusLeft, 2*grace), alive("n3", "a")},
			want:  []voters.Change{remove("n2")}},
		{name: "5 voters: a voter that left without a drain keeps its seat for the grace", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), peer("n4", "a", mesh.StatusLeft, time.Second), alive("n5", "a")}},
		{name: "5 voters: past the grace it goes", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), peer("n4", "a", mesh.StatusLeft, 2*grace), alive("n5", "a")},
			want:  []voters.Change{remove("n4")}},
		{name: "5 voters: of two that left past the grace, the one gone longest goes first", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), peer("n3", "a", mesh.StatusLeft, 2*grace), peer("n4", "a", mesh.StatusLeft, 3*grace), alive("n5", "a")},
			want:  []voters.Change{remove("n4")}},
		{name: "5 voters: a dead one and one that left, past the grace: the one gone longest goes first", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), peer("n3", "a", mesh.StatusLeft, 2*grace), peer("n4", "a", mesh.StatusDead, 3*grace), alive("n5", "a")},
			want:  []voters.Change{remove("n4")}},
		{name: "a draining voter that left goes before a voter that left without a drain", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusLeft, 2*grace), draining(peer("n3", "a", mesh.StatusLeft, 0)), alive("n4", "a"), alive("n5", "a")},
			want:  []voters.Change{remove("n3")}},
		{name: "a voter that left without a drain is not live: a third that died leaves no quorum to remove it", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusLeft, 2*grace), peer("n3", "a", mesh.StatusDead, 2*grace), alive("n4", "a")}},
		{name: "5 voters, more than wanted: a voter that left within the grace is demoted first, as a dead one", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			opts:  voters.Options{Voters: 3},
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "a"), peer("n5", "a", mesh.StatusLeft, time.Second)},
			want:  []voters.Change{demote("n5")}},

		// Rule 6: dead voters past the grace, and dead non-voters.
		{name: "a voter dead exactly the grace stays", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusDead, grace), alive("n3", "a"), alive("n4", "a")}},
		{name: "a voter dead longer than the grace goes", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusDead, grace+time.Nanosecond), alive("n3", "a"), alive("n4", "a")},
			want:  []voters.Change{remove("n2")}},
		{name: "a shorter grace", cfg: conf(voter("n1"), voter("n2"), voter("n3")), opts: voters.Options{Voters: 3, DeadVoterGrace: 10 * time.Second},
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusDead, 11*time.Second), alive("n3", "a")},
			want:  []voters.Change{remove("n2")}},
		{name: "the longest dead voter goes first", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusDead, 2*grace), peer("n3", "a", mesh.StatusDead, 3*grace), alive("n4", "a"), alive("n5", "a")},
			want:  []voters.Change{remove("n3")}},
		{name: "a draining voter that left goes before a dead one", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusDead, 2*grace), draining(peer("n3", "a", mesh.StatusLeft, 0)), alive("n4", "a"), alive("n5", "a")},
			want:  []voters.Change{remove("n3")}},
		{name: "a suspect voter stays however long", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusSuspect, time.Hour), alive("n3", "a"), alive("n4", "a")}},
		{name: "a dead non-voter past the grace goes", cfg: conf(voter("n1"), nonvoter("n2"), nonvoter("n3")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusDead, grace+time.Second), peer("n3", "a", mesh.StatusDead, grace)},
			want:  []voters.Change{remove("n2")}},
		{name: "self dead by the mesh's view stays", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{peer("n1", "a", mesh.StatusDead, time.Hour), alive("n2", "a"), alive("n3", "a")}},

		// Rule 13: the quorum guard at 1, 2, 3 and 5 voters.
		{name: "1 voter: nothing to remove", cfg: conf(voter("n1"), nonvoter("n2")), opts: voters.Options{Voters: 1},
			peers: []voters.Peer{peer("n1", "a", mesh.StatusLeft, 0), alive("n2", "a")}},
		{name: "2 voters: the dead one goes (1 of 1 left)", cfg: conf(voter("n1"), voter("n2")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusDead, 2*grace)},
			want:  []voters.Change{remove("n2")}},
		{name: "3 voters, 1 dead: it goes (2 of 2 left)", cfg: conf(voter("n1"), voter("n2"), voter("n3")), opts: voters.Options{Voters: 3},
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusDead, 2*grace), alive("n3", "a")},
			want:  []voters.Change{remove("n2")}},
		{name: "3 voters, 2 dead: no quorum, nothing", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusDead, 2*grace), peer("n3", "a", mesh.StatusDead, 2*grace), alive("n4", "b")}},
		{name: "3 voters, 1 dead and 1 suspect: suspects do not count", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusDead, 2*grace), peer("n3", "a", mesh.StatusSuspect, 0)}},
		{name: "3 voters, 1 unknown, 1 dead: unknown ones do not count", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusDead, 2*grace)}},
		{name: "5 voters, 2 dead: one goes (3 of 4)", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")), opts: voters.Options{Voters: 5},
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), peer("n4", "a", mesh.StatusDead, 2*grace), peer("n5", "a", mesh.StatusDead, 3*grace)},
			want:  []voters.Change{remove("n5")}},
		{name: "5 voters, 3 dead: no quorum, nothing", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")), opts: voters.Options{Voters: 5},
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), peer("n3", "a", mesh.StatusDead, 2*grace), peer("n4", "a", mesh.StatusDead, 2*grace), peer("n5", "a", mesh.StatusDead, 2*grace)}},
		{name: "5 voters, 2 dead, 1 suspect: 2 live of 4 is no quorum", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")), opts: voters.Options{Voters: 5},
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), peer("n3", "a", mesh.StatusSuspect, 0), peer("n4", "a", mesh.StatusDead, 2*grace), peer("n5", "a", mesh.StatusDead, 2*grace)}},

		// Rule 8: promotion, spread over regions.
		{name: "a new region first", cfg: conf(voter("n1"), nonvoter("n2"), nonvoter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "c"), alive("n4", "b")},
			want:  []voters.Change{promote("n3")}},
		{name: "the fewest voters, then the lowest id", cfg: conf(voter("n1"), voter("n2"), nonvoter("n3"), nonvoter("n4"), nonvoter("n5")), opts: voters.Options{Voters: 5},
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "b"), alive("n3", "a"), alive("n4", "b"), alive("n5", "a")},
			want:  []voters.Change{promote("n3")}},
		{name: "one region: the lowest id", cfg: conf(voter("n1"), nonvoter("n3"), nonvoter("n2")),
			peers: []voters.Peer{alive("n1", ""), alive("n2", ""), alive("n3", "")},
			want:  []voters.Change{promote("n2")}},
		{name: "only alive non-voters are promoted", cfg: conf(voter("n1"), nonvoter("n2"), nonvoter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "b", mesh.StatusSuspect, 0), peer("n3", "b", mesh.StatusDead, 0), alive("n4", "a")},
			want:  []voters.Change{promote("n4")}},
		{name: "a non-voter promoted with its new address", cfg: conf(voter("n1"), nonvoter("n2")), opts: voters.Options{Voters: 3},
			peers: []voters.Peer{alive("n1", "a"), moved(alive("n2", "a"), "new-n2")},
			want: []voters.Change{{Kind: voters.ChangeUpdateAddress, ID: "n2", Address: "new-n2"},
				{Kind: voters.ChangePromote, ID: "n2", Address: "new-n2"}}},
		{name: "enough voters: no promotion", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), alive("n4", "b")}},
		{name: "a voter dead within the grace keeps its seat", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), peer("n3", "a", mesh.StatusDead, time.Second), alive("n4", "b")}},
		{name: "an unknown non-voter is not promoted", cfg: conf(voter("n1"), nonvoter("n2")),
			peers: []voters.Peer{alive("n1", "a")}},
		{name: "a non-voter the leader's heartbeats do not reach is not promoted", cfg: conf(voter("n1"), voter("n3"), nonvoter("n2")),
			peers: []voters.Peer{alive("n1", "a"), unreachable(alive("n2", "a")), alive("n3", "a")}},
		{name: "another that they reach is, whatever its region", cfg: conf(voter("n1"), voter("n3"), nonvoter("n2"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), unreachable(alive("n2", "b")), alive("n3", "a"), alive("n4", "a")},
			want:  []voters.Change{promote("n4")}},
		{name: "a non-voter just added that has not answered yet is not promoted", cfg: conf(voter("n1"), nonvoter("n2")),
			peers: []voters.Peer{alive("n1", "a"), pending(alive("n2", "b"))}},
		{name: "and the seat waits for it when its region is the one wanted", cfg: conf(voter("n1"), nonvoter("n2"), nonvoter("n3")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), pending(alive("n3", "b"))}},
		{name: "but not for a pending peer whose region is not", cfg: conf(voter("n1"), nonvoter("n2"), nonvoter("n3")),
			peers: []voters.Peer{alive("n1", "a"), pending(alive("n2", "a")), alive("n3", "b")},
			want:  []voters.Change{promote("n3")}},

		// Rule 11: demotion of extra voters.
		{name: "an extra voter in the most crowded region, highest id", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "b"), alive("n3", "b"), alive("n4", "c")},
			want:  []voters.Change{demote("n3")}},
		{name: "a dead extra voter first", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4")),
			peers: []voters.Peer{alive("n1", "a"), peer("n2", "b", mesh.StatusDead, time.Second), alive("n3", "b"), alive("n4", "b")},
			want:  []voters.Change{demote("n2")}},
		{name: "self is not demoted", cfg: conf(voter("n1"), voter("n2")), opts: voters.Options{Voters: 1},
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a")},
			want:  []voters.Change{demote("n2")}},

		// Rule 12: servers the mesh does not know are left alone.
		{name: "unknown servers stay", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a")}},

		// Rules 6, 7 and 12: a server the mesh forgot (a voter kept by rule 7's floor past its
		// retention, or a gateway that did not come back when the fleet was started again) is
		// unknown since the leader found it missing, and past the grace it is down as a dead one.
		{name: "3 voters: a voter the mesh does not list keeps its seat for the grace", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), unlisted("n2", grace), alive("n3", "a"), alive("n4", "a")}},
		{name: "3 voters: a voter the mesh does not list, past the grace, goes and the non-voter takes its seat", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), unlisted("n2", grace+time.Nanosecond), alive("n3", "a"), alive("n4", "a")},
			want:  []voters.Change{remove("n2")}},
		{name: "3 voters: a voter the mesh does not list, past the grace with nobody to take its seat, stays (rule 7)", cfg: conf(voter("n1"), voter("n2"), voter("n3")),
			peers: []voters.Peer{alive("n1", "a"), unlisted("n2", 2*grace), alive("n3", "a")}},
		{name: "3 voters: nor can a non-voter the mesh does not list take it", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")),
			peers: []voters.Peer{alive("n1", "a"), unlisted("n2", 2*grace), alive("n3", "a"), unlisted("n4", time.Second)}},
		{name: "3 voters, --raft-voters 3: a voter the mesh does not list goes past the grace without rule 7", cfg: conf(voter("n1"), voter("n2"), voter("n3")), opts: voters.Options{Voters: 3},
			peers: []voters.Peer{alive("n1", "a"), unlisted("n2", 2*grace), alive("n3", "a")},
			want:  []voters.Change{remove("n2")}},
		{name: "5 voters: a voter the mesh does not list keeps its seat for the grace", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), unlisted("n4", grace), alive("n5", "a")}},
		{name: "5 voters: past the grace it goes, with nobody to take its seat", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), unlisted("n4", grace+time.Second), alive("n5", "a")},
			want:  []voters.Change{remove("n4")}},
		{name: "5 voters, two the mesh does not list past the grace: the one missing longest goes first", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), unlisted("n4", 2*grace), unlisted("n5", 3*grace)},
			want:  []voters.Change{remove("n5")}},
		{name: "5 voters: a dead one and one the mesh does not list, past the grace: the one gone longest goes first", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), peer("n4", "a", mesh.StatusDead, 3*grace), unlisted("n5", 2*grace)},
			want:  []voters.Change{remove("n4")}},
		{name: "5 voters, three the mesh does not list: no quorum, nothing", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), unlisted("n3", 2*grace), unlisted("n4", 2*grace), unlisted("n5", 2*grace)}},
		{name: "a non-voter the mesh does not list goes past the grace", cfg: conf(voter("n1"), nonvoter("n2"), nonvoter("n3")),
			peers: []voters.Peer{alive("n1", "a"), unlisted("n2", grace+time.Second), unlisted("n3", grace)},
			want:  []voters.Change{remove("n2")}},
		{name: "a server the mesh does not list, with no time since, is left alone", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")),
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "a"), alive("n3", "a"), {ID: "n4", Status: mesh.StatusUnknown}, alive("n5", "a")}},
		{name: "more voters than wanted: one the mesh does not list is not demoted within the grace", cfg: conf(voter("n1"), voter("n2"), voter("n3"), voter("n4")),
			opts:  voters.Options{Voters: 3},
			peers: []voters.Peer{alive("n1", "a"), alive("n2", "b"), alive("n3", "c"), unlisted("n4", time.Second)},
			want:  []voters.Change{demote("n3")}},
		{name: "its region is not counted: the non-voter of the region it had is not preferred", cfg: conf(voter("n1"), voter("n2"), nonvoter("n3"), nonvoter("n4")),
			opts:  voters.Options{Voters: 3},
			peers: []voters.Peer{alive("n1", "a"), unlisted("n2", time.Second), alive("n3", "a"), alive("n4", "")},
			want:  []voters.Change{promote("n4")}},

		// Rule 14: the order of a plan.
		{name: "everything at once", cfg: conf(voter("n1"), voter("n2"), voter("n3"), nonvoter("n4"), nonvoter("n5")),
			peers: []voters.Peer{alive("n1", "a"), moved(alive("n2", "a"), "new-n2"), draining(peer("n3", "b", mesh.StatusLeft, 0)),
				peer("n4", "a", mesh.StatusDead, 2*grace), alive("n5", "b"), alive("n6", "c")},
			want: []voters.Change{{Kind: voters.ChangeUpdateAddress, ID: "n2", Address: "new-n2", Voter: true},
				remove("n3"), remove("n4"), add("n6")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.opts.Self == "" {
				tt.opts.Self = "n1"
			}
			got := voters.Plan(tt.cfg, tt.peers, planNow, tt.opts)
			if diff := cmp.Diff(tt.want, got, ignoreReason, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("plan (-want +got):\n%s", diff)
			}
			for _, c := range got {
				if c.Reason == "" {
					t.Errorf("%+v has no reason", c)
				}
			}
			// Deterministic: the order of the inputs does not matter.
			r := rand.New(rand.NewPCG(1, 2))
			for range 10 {
				cfg := conf(slices.Clone(tt.cfg.Servers)...)
				peers := slices.Clone(tt.peers)
				r.Shuffle(len(cfg.Servers), func(i, j int) { cfg.Servers[i], cfg.Servers[j] = cfg.Servers[j], cfg.Servers[i] })
				r.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
				if diff := cmp.Diff(got, voters.Plan(cfg, peers, planNow, tt.opts)); diff != "" {
					t.Fatalf("plan of shuffled inputs differs:\n%s", diff)
				}
			}
		})
	}
}

func TestPlanDuplicatePeers(t *testing.T) {
	// Two entries for n2: the later Since is the mesh's newer word.
	peers := []voters.Peer{alive("n1", "a"), peer("n2", "a", mesh.StatusLeft, 0), peer("n2", "a", mesh.StatusAlive, time.Hour)}
	for _, ps := range [][]voters.Peer{peers, {peers[0], peers[2], peers[1]}} {
		got := voters.Plan(conf(voter("n1"), nonvoter("n2")), ps, planNow, voters.Options{Self: "n1"})
		if diff := cmp.Diff([]voters.Change{remove("n2")}, got, ignoreReason); diff != "" {
			t.Fatalf("plan (-want +got):\n%s", diff)
		}
	}
}

// applyChange returns cfg with c applied as raft applies it, or an error if c makes no sense
// on cfg.
func applyChange(cfg raft.Configuration, c voters.Change) (raft.Configuration, error) {
	out := conf(slices.Clone(cfg.Servers)...)
	i := slices.IndexFunc(out.Servers, func(s raft.Server) bool { return string(s.ID) == c.ID })
	s := raft.Server{ID: raft.ServerID(c.ID), Address: raft.ServerAddress(c.Address)}
	switch {
	case c.Kind == voters.ChangeAddNonvoter && i < 0:
		s.Suffrage = raft.Nonvoter
		out.Servers = append(out.Servers, s)
	case c.Kind == voters.ChangePromote && i >= 0:
		s.Suffrage = raft.Voter
		out.Servers[i] = s
	case c.Kind == voters.ChangeDemote && i >= 0:
		out.Servers[i].Suffrage = raft.Nonvoter
	case c.Kind == voters.ChangeRemove && i >= 0:
		out.Servers = slices.Delete(out.Servers, i, i+1)
	case c.Kind == voters.ChangeUpdateAddress && i >= 0:
		out.Servers[i].Address = s.Address
	default:
		return cfg, fmt.Errorf("%+v does not apply to %+v", c, cfg)
	}
	return out, nil
}
