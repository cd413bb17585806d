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
type voteGuard struct {
	raft.Transport
	self      raft.ServerID
	rejoining atomic.Bool
	log       *slog.Logger

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
