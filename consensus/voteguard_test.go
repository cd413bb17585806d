package consensus

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/test/testkit"
)

// guardPair is a candidate's transport connected to a guarded node's.
func guardPair(t *testing.T, rejoining bool) (cand *raft.InmemTransport, g *voteGuard) {
	t.Helper()
	_, a := raft.NewInmemTransport("cand")
	_, b := raft.NewInmemTransport("node")
	a.Connect("node", b)
	b.Connect("cand", a)
	g = newVoteGuard(b, "node", rejoining, testkit.Quiet())
	t.Cleanup(func() { _ = g.Close(); _ = a.Close() })
	return a, g
}

// serve answers the RPCs the guard hands raft with a granted vote, until the test ends.
func serve(t *testing.T, g *voteGuard) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case rpc := <-g.Consumer():
				switch rpc.Command.(type) {
				case *raft.RequestVoteRequest:
					rpc.Respond(&raft.RequestVoteResponse{Term: 7, Granted: true}, nil)
				case *raft.RequestPreVoteRequest:
					rpc.Respond(&raft.RequestPreVoteResponse{Term: 7, Granted: true}, nil)
				default:
					rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
				}
			case <-stop:
				return
			}
		}
	}()
}

// TestVoteGuard: while rejoining, the node refuses every vote and pre-vote (with term 0, which
// no candidate takes for a newer term) without raft seeing the request, and its own requests
// fail; replication passes through. Once it rejoined, raft answers the votes.
func TestVoteGuard(t *testing.T) {
	cand, g := guardPair(t, true)
	serve(t, g)
	vote := func() raft.RequestVoteResponse {
		var resp raft.RequestVoteResponse
		req := &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("cand")}, Term: 7}
		if err := cand.RequestVote("node", "node", req, &resp); err != nil {
			t.Fatalf("RequestVote: %v", err)
		}
		return resp
	}
	preVote := func() raft.RequestPreVoteResponse {
		var resp raft.RequestPreVoteResponse
		req := &raft.RequestPreVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("cand")}, Term: 7}
		if err := cand.RequestPreVote("node", "node", req, &resp); err != nil {
			t.Fatalf("RequestPreVote: %v", err)
		}
		return resp
	}
	if r := vote(); r.Granted || r.Term != 0 {
		t.Errorf("rejoining: vote answered granted=%v term=%d, want a refusal with term 0", r.Granted, r.Term)
	}
	if r := preVote(); r.Granted || r.Term != 0 {
		t.Errorf("rejoining: pre-vote answered granted=%v term=%d, want a refusal with term 0", r.Granted, r.Term)
	}
	var ae raft.AppendEntriesResponse
	if err := cand.AppendEntries("node", "node", &raft.AppendEntriesRequest{Term: 7}, &ae); err != nil || !ae.Success {
		t.Errorf("rejoining: replication answered %+v, %v; it must pass through", ae, err)
	}
	if err := g.RequestVote("cand", "cand", &raft.RequestVoteRequest{}, &raft.RequestVoteResponse{}); err == nil {
		t.Error("rejoining: the node's own vote request went out")
	}
	if err := g.RequestPreVote("cand", "cand", &raft.RequestPreVoteRequest{}, &raft.RequestPreVoteResponse{}); err == nil {
		t.Error("rejoining: the node's own pre-vote request went out")
	}

	g.setRejoining(false)
	if r := vote(); !r.Granted {
		t.Error("rejoined: raft did not see the vote request")
	}
	if r := preVote(); !r.Granted {
		t.Error("rejoined: raft did not see the pre-vote request")
	}
}

// TestVoteGuardClose: Close stops the relay and closes the wrapped transport, once.
func TestVoteGuardClose(t *testing.T) {
	_, inner := raft.NewInmemTransport("node")
	g := newVoteGuard(inner, "node", false, testkit.Quiet())
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	select {
	case <-g.stop:
	default:
		t.Fatal("the relay was not told to stop")
	}
}

// TestVoteForAVoterPromotedSinceOurConfiguration: a voter whose configuration predates a
// candidate's promotion still votes for it on term and log, as Raft's vote rule has it
// (hashicorp/raft refuses a candidate its own configuration does not list as a voter). The
// chaos test's seed 99 at 09e4f5b in small: C is promoted and B demoted while L is cut off, so
// the voters are A, L and C while L still has A, B and L. With A cut off, C needs L's vote;
// refused, nobody leads until A is back.
func TestVoteForAVoterPromotedSinceOurConfiguration(t *testing.T) {
	c := startCluster(t, 4)
	all := []int{0, 1, 2, 3}
	a := c.waitLeader(t, all...)
	rest := others(4, a)
	b, l, cand := rest[0], rest[1], rest[2]
	change := func(ch voters.Change) {
		t.Helper()
		if err := c.nodes[a].ChangeMembership(ch, 0, 5*time.Second).Error(); err != nil {
			t.Fatalf("%s %s: %v", ch.Kind, ch.ID, err)
		}
	}
	id := func(i int) string { return c.nodes[i].ID() }
	change(voters.Change{Kind: voters.ChangeDemote, ID: id(cand)})
	res, err := c.nodes[a].Apply(t.Context(), fsm.Register{Spec: spec(t, 8101), Owner: id(a)})
	if err != nil {
		t.Fatal(err)
	}
	waitApplied(t, c.nodes, res.Index) // every node has the voters A, B and L

	c.isolate(l)
	change(voters.Change{Kind: voters.ChangePromote, ID: id(cand), Address: string(c.trans[cand].LocalAddr())})
	change(voters.Change{Kind: voters.ChangeDemote, ID: id(b)})
	c.heal()
	c.isolate(a)
	lead := c.waitLeader(t, b, l, cand)
	if lead != cand {
		t.Fatalf("%s leads; want %s, the one voter of the new configuration that can", id(lead), id(cand))
	}
}

// TestAdmitUnknownCandidates: a vote request from a candidate the latest configuration does
// not list as a voter reaches raft without its id, a pre-vote request with this node's; a
// voter's requests, and every request before raft runs or while the configuration is empty,
// pass as they are. The candidate's own request is never changed.
func TestAdmitUnknownCandidates(t *testing.T) {
	g := &voteGuard{self: "n3"}
	cfg := raft.Configuration{Servers: []raft.Server{
		{ID: "n1", Suffrage: raft.Voter}, {ID: "n2", Suffrage: raft.Nonvoter}, {ID: "n3", Suffrage: raft.Voter}}}
	vote := func(id string) raft.RPC {
		return raft.RPC{Command: &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte(id), Addr: []byte("a-" + id)}}}
	}
	preVote := func(id string) raft.RPC {
		return raft.RPC{Command: &raft.RequestPreVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte(id), Addr: []byte("a-" + id)}}}
	}
	idOf := func(rpc raft.RPC) string { return string(rpc.Command.(raft.WithRPCHeader).GetRPCHeader().ID) }
	if got := idOf(g.admit(vote("n4"))); got != "n4" {
		t.Fatalf("before raft runs: id %q, want n4 as sent", got)
	}
	latest := func() raft.Configuration { return cfg }
	g.configuration.Store(&latest)
	for _, tt := range []struct {
		name string
		rpc  raft.RPC
		want string
	}{
		{"a voter's vote request", vote("n1"), "n1"},
		{"a non-voter's vote request", vote("n2"), ""},
		{"an unknown server's vote request", vote("n4"), ""},
		{"a voter's pre-vote request", preVote("n1"), "n1"},
		{"a non-voter's pre-vote request", preVote("n2"), "n3"},
		{"an unknown server's pre-vote request", preVote("n4"), "n3"},
	} {
		sent := idOf(tt.rpc)
		if got := idOf(g.admit(tt.rpc)); got != tt.want {
			t.Errorf("%s: raft sees id %q, want %q", tt.name, got, tt.want)
		}
		if idOf(tt.rpc) != sent {
			t.Errorf("%s: the candidate's request was changed", tt.name)
		}
	}
	cfg = raft.Configuration{}
	if got := idOf(g.admit(vote("n4"))); got != "n4" {
		t.Fatalf("with no configuration: id %q, want n4 as sent (raft grants it itself)", got)
	}
}

// TestRemovedVoterWithAStaleLogDoesNotLead: what admit lets through is judged on the log. R is
// removed while cut off, so it lacks its removal and the writes after it; once the leader is
// cut off too, R campaigns beside B and C, whose configuration no longer holds it. Its requests
// reach raft without the membership check, and raft refuses them on the log: B or C leads.
func TestRemovedVoterWithAStaleLogDoesNotLead(t *testing.T) {
	c := startCluster(t, 4)
	a := c.waitLeader(t, 0, 1, 2, 3)
	rest := others(4, a)
	b, cc, r := rest[0], rest[1], rest[2]
	c.isolate(r)
	if err := c.nodes[a].ChangeMembership(voters.Change{Kind: voters.ChangeRemove, ID: c.nodes[r].ID()}, 0, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	res, err := c.nodes[a].Apply(t.Context(), fsm.Register{Spec: spec(t, 8102), Owner: c.nodes[a].ID()})
	if err != nil {
		t.Fatal(err)
	}
	waitApplied(t, []*Node{c.nodes[a], c.nodes[b], c.nodes[cc]}, res.Index)

	c.heal()
	c.isolate(a)
	lead := c.waitLeader(t, b, cc)
	if _, err := c.nodes[lead].Apply(t.Context(), fsm.Register{Spec: spec(t, 8103), Owner: c.nodes[lead].ID()}); err != nil {
		t.Fatalf("the new leader %s cannot write: %v", c.nodes[lead].ID(), err)
	}
	if c.nodes[r].IsLeader() {
		t.Fatalf("the removed %s leads", c.nodes[r].ID())
	}
}
