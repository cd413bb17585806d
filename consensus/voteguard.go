package consensus

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// errRejoining is what a rejoining node's own vote requests fail with. raft counts a failed
// request as a refusal (its text must not contain "unexpected command", which raft takes for a
// peer too old for pre-vote, and counts as granted).
var errRejoining = errors.New("this node is rejoining: it asks no vote until a leader confirmed it caught up")

// refusalLogEvery spaces the log lines of refused votes: a candidate asks again every election
// timeout.
const refusalLogEvery = 10 * time.Second

// voteGuard is raft's transport with votes held back while the node is rejoining: its raft
// state is new (a first join, or a state directory that was lost) and no leader has confirmed
// that it caught up. Raft grants a vote whenever its configuration is empty, and a node whose
// log was wiped would otherwise vote, under a voter's id, for a candidate that lacks entries it
// acknowledged before ("amnesia"). So while rejoining the node answers every vote and
// pre-vote request with a refusal, and its own requests fail: it can neither elect nor be
// elected. Everything else (replication, snapshots, heartbeats) passes through, so that it
// catches up. Being the one channel raft reads its RPCs from, it also takes the RPCs this node
// makes for its own raft (deliver: the leader's commit notices, commitnotice.go).
//
// It also hands raft the vote requests of candidates that this node's configuration does not
// list as voters so that raft judges them on term and log alone (admit): hashicorp/raft refuses
// them outright (its PR #526), which Raft's vote rule does not (a server processes votes from
// servers outside its configuration, Ongaro's thesis §4.1), and a voter that missed a promotion
// then refuses the one candidate a quorum needs: the chaos test's seed 99 at 09e4f5b had no
// leader for 45 s with four gateways up.
type voteGuard struct {
	raft.Transport
	self      raft.ServerID
	rejoining atomic.Bool
	log       *slog.Logger
	// configuration returns this node's latest raft configuration, once raft runs (setRaft).
	configuration atomic.Pointer[func() raft.Configuration]

	in   <-chan raft.RPC
	out  chan raft.RPC
	stop chan struct{}
	once sync.Once

	lastLog atomic.Int64 // unix nanoseconds of the last refusal logged
}

// newVoteGuard wraps t and starts relaying its RPCs.
func newVoteGuard(t raft.Transport, self raft.ServerID, rejoining bool, log *slog.Logger) *voteGuard {
	g := &voteGuard{Transport: t, self: self, log: log, in: t.Consumer(), out: make(chan raft.RPC), stop: make(chan struct{})}
	g.rejoining.Store(rejoining)
	go g.relay()
	return g
}

// setRaft gives the guard the raft it feeds, whose configuration admit reads.
func (g *voteGuard) setRaft(r *raft.Raft) {
	latest := func() raft.Configuration { return r.GetConfiguration().Configuration() }
	g.configuration.Store(&latest)
}

// setRejoining turns the guard on or off.
func (g *voteGuard) setRejoining(on bool) { g.rejoining.Store(on) }

// Consumer implements raft.Transport: the RPCs the guard did not answer itself.
func (g *voteGuard) Consumer() <-chan raft.RPC { return g.out }

// relay hands raft every RPC but the votes it refuses.
func (g *voteGuard) relay() {
	for {
		select {
		case rpc := <-g.in:
			if g.refuse(rpc) {
				continue
			}
			rpc = g.admit(rpc)
			select {
			case g.out <- rpc:
			case <-g.stop:
				return
			}
		case <-g.stop:
			return
		}
	}
}

// deliver hands raft an RPC made by this node (commitnotice.go) as if the transport had
// received it, and reports whether raft took it before stop or timeout.
func (g *voteGuard) deliver(rpc raft.RPC, stop <-chan struct{}, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case g.out <- rpc:
		return true
	case <-g.stop:
	case <-stop:
	case <-t.C:
	}
	return false
}

// refuse answers a vote or pre-vote request with a refusal while rejoining. The answer carries
// term 0, which no candidate takes for a newer term, so it changes nothing but the tally.
func (g *voteGuard) refuse(rpc raft.RPC) bool {
	if !g.rejoining.Load() {
		return false
	}
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(g.self),
		Addr: g.EncodePeer(g.self, g.LocalAddr())}
	switch req := rpc.Command.(type) {
	case *raft.RequestVoteRequest:
		g.logRefusal("vote", req.GetRPCHeader().ID)
		rpc.Respond(&raft.RequestVoteResponse{RPCHeader: header, Granted: false}, nil)
	case *raft.RequestPreVoteRequest:
		g.logRefusal("pre-vote", req.GetRPCHeader().ID)
		rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: header, Granted: false}, nil)
	default:
		return false
	}
	return true
}

// admit rewrites a vote or pre-vote request from a candidate that this node's latest
// configuration does not list as a voter, so that raft judges it as Raft's vote rule does: on
// its term, this node's vote of the term and the candidate's log. A vote request loses the
// candidate's id, which raft then takes for a server older than ids and skips its membership
// checks; the vote is still persisted against the candidate's address, one per term. A pre-vote
// request, which raft always checks by id and which persists nothing, names this node instead.
// Nothing else changes: a candidate whose log lacks a committed entry is still refused by the
// majority that holds it, and a node that knows a leader still refuses every candidate but it.
// The request is copied, not changed: an in-memory transport hands over the candidate's own.
func (g *voteGuard) admit(rpc raft.RPC) raft.RPC {
	switch req := rpc.Command.(type) {
	case *raft.RequestVoteRequest:
		if g.unknownVoter(req.ID) {
			c := *req
			c.ID = nil
			rpc.Command = &c
		}
	case *raft.RequestPreVoteRequest:
		if g.unknownVoter(req.ID) {
			c := *req
			c.ID = []byte(g.self)
			rpc.Command = &c
		}
	}
	return rpc
}

// unknownVoter reports whether id names a server that this node's latest configuration, once
// raft runs and has one, does not list as a voter.
func (g *voteGuard) unknownVoter(id []byte) bool {
	latest := g.configuration.Load()
	if latest == nil || len(id) == 0 {
		return false
	}
	cfg := (*latest)()
	if len(cfg.Servers) == 0 {
		return false // raft grants such votes itself: a cluster forming
	}
	for _, s := range cfg.Servers {
		if string(s.ID) == string(id) && s.Suffrage == raft.Voter {
			return false
		}
	}
	return true
}

func (g *voteGuard) logRefusal(kind string, candidate []byte) {
	now := time.Now().UnixNano()
	last := g.lastLog.Load()
	if last != 0 && now-last < int64(refusalLogEvery) || !g.lastLog.CompareAndSwap(last, now) {
		return
	}
	g.log.Warn("refused a vote: this node's raft state is new and no leader has confirmed it caught up, so it may lack entries it acknowledged before",
		"kind", kind, "candidate", string(candidate))
}

// RequestVote implements raft.Transport; it fails while rejoining.
func (g *voteGuard) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if g.rejoining.Load() {
		return errRejoining
	}
	return g.Transport.RequestVote(id, target, args, resp)
}

// RequestPreVote implements raft.WithPreVote; it fails while rejoining, and when the wrapped
// transport has no pre-vote (raft then counts the refusal; it only asks when every transport
// of the group supports it, which ours do).
func (g *voteGuard) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if g.rejoining.Load() {
		return errRejoining
	}
	pv, ok := g.Transport.(raft.WithPreVote)
	if !ok {
		return errors.New("the raft transport has no pre-vote")
	}
	return pv.RequestPreVote(id, target, args, resp)
}

// Close implements raft.WithClose: it stops the relay and closes the wrapped transport.
func (g *voteGuard) Close() error {
	g.once.Do(func() { close(g.stop) })
	return closeTransport(g.Transport)
}
