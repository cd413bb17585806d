package consensus

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/ctxtime"
)

// Bounds of the leader's own duties.
const (
	barrierTimeout   = 30 * time.Second
	leaderRetryDelay = time.Second
)

// watchLeadership follows raft's NotifyCh (not the best-effort LeaderCh): it starts the leader
// loop on gaining leadership and cancels it, waiting for it to return, on losing it.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	defer n.recoverLog("leadership watch")
	var run *leaderRun
	defer func() { run.stop() }()
	for {
		select {
		case leader := <-n.notifyCh:
			switch {
			case !leader:
				n.silence.mark(time.Now()) // a former leader's last contact is from before it led
				n.log.Info("lost raft leadership")
				run.stop()
				run = nil
			case run == nil:
				n.silence.mark(time.Now()) // QuorumContact counts a leader's from when it began to lead
				n.log.Info("gained raft leadership", "term", n.raft.CurrentTerm())
				run = n.startLeading()
			}
		case <-n.stop:
			return
		}
	}
}

// leaderRun is one term of leadership's loop.
type leaderRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (n *Node) startLeading() *leaderRun {
	ctx, cancel := context.WithCancel(context.Background())
	run := &leaderRun{cancel: cancel, done: make(chan struct{})}
	go n.leaderLoop(ctx, run.done)
	return run
}

// stop cancels the loop and waits for it; a nil run is not leading.
func (r *leaderRun) stop() {
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// leaderLoop runs while this node leads: it waits on a Barrier so that the FSM holds every
// entry of earlier terms, does the node's own duties, then runs Config.LeaderLoop.
func (n *Node) leaderLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	defer n.recoverLog("leader loop")
	for {
		// Waited on with ctx: raft may never resolve a future it holds when it shuts down (see
		// wait), and the leadership's end must end this loop whatever raft does.
		err := n.wait(ctx, n.barrier(barrierTimeout))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("leader barrier failed; retrying", "err", err)
		if ctxtime.Sleep(ctx, leaderRetryDelay) != nil {
			return
		}
	}
	n.establishLeadership(ctx)
	if n.cfg.LeaderLoop != nil && ctx.Err() == nil {
		n.cfg.LeaderLoop(ctx)
	}
}

// establishLeadership sets the cluster id if the state has none (a cluster just bootstrapped)
// and brings this node's own address in the raft configuration up to date.
func (n *Node) establishLeadership(ctx context.Context) {
	n.updateOwnAddress(ctx)
	for n.fsm.ClusterID() == "" {
		id := newUUID()
		_, err := n.Apply(ctx, fsm.InitCluster{ClusterID: id})
		if err == nil || errors.Is(err, fsm.ErrConflict) {
			n.log.Info("cluster id set", "cluster_id", n.fsm.ClusterID())
			return
		}
		n.log.Warn("setting the cluster id failed; retrying", "err", err)
		if ctxtime.Sleep(ctx, leaderRetryDelay) != nil {
			return
		}
	}
}

// updateOwnAddress re-adds this node with its current address when the configuration holds an
// old one (a restart on another port or host keeps the id; DESIGN.md section 14).
func (n *Node) updateOwnAddress(ctx context.Context) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		n.log.Warn("reading the raft configuration failed", "err", err)
		return
	}
	self, addr := raft.ServerID(n.cfg.NodeID), n.trans.LocalAddr()
	for _, s := range f.Configuration().Servers {
		if s.ID != self || s.Address == addr {
			continue
		}
		add := n.raft.AddVoter
		if s.Suffrage == raft.Nonvoter {
			add = n.raft.AddNonvoter
		}
		if err := n.wait(ctx, add(self, addr, f.Index(), barrierTimeout)); err != nil {
			n.log.Warn("updating this node's raft address failed", "from", s.Address, "to", addr, "err", err)
			return
		}
		n.log.Info("updated this node's raft address", "from", s.Address, "to", addr)
	}
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
