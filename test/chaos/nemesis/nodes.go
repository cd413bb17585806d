package nemesis

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/meshgw/meshgw/test/chaos/cluster"
)

// settle bounds the wait for the cluster to form again after a fault healed.
const settle = 45 * time.Second

// processFault kills (and wipes) or pauses node for d, then waits until it is back: it sees a
// leader and another gateway sees it alive; a wiped gateway also until a leader confirmed it
// caught up (room rule 4).
func (n *Nemesis) processFault(ctx context.Context, c *claim, p plan, node *cluster.Node) {
	n.say("%s on %s for %v", p.kind, node.ID, p.hold.Round(time.Millisecond))
	n.count(p.kind)
	switch p.kind {
	case Kill:
		n.kill(ctx, node, p.hold, false)
	case Wipe:
		n.kill(ctx, node, p.hold, true)
	case Pause:
		n.pause(ctx, node, p.hold)
	}
	n.room.healed(c)
	n.waitBack(c, p.kind, node)
	if p.kind == Wipe {
		awaitRejoin(ctx, n.stop(), func() bool { return !n.C.Rejoining(node.ID) }, func() {
			n.fail("after wipe on %s: still rejoining (not confirmed caught up) after %v", node.ID, settle)
		})
	}
}

// awaitRejoin waits until a wiped gateway rejoined (a leader confirmed it caught up), while its
// fault keeps its claim. Past settle it calls late once and goes on waiting, to the end of the
// faults (ctx) or of the run (stop): a second wipe among the voters meanwhile is beyond what
// raft promises (room rule 4), and would turn this failure into a cluster that no leader can
// ever form again.
func awaitRejoin(ctx, stop context.Context, rejoined func() bool, late func()) {
	if waitCond(stop, settle, rejoined) == nil {
		return
	}
	late()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	unhook := context.AfterFunc(stop, cancel)
	defer unhook() // stop outlives this wait: leave nothing registered on it
	_ = waitCond(ctx, 24*time.Hour, rejoined)
}

// waitBack waits until node sees a leader and another gateway sees it alive, and keeps in c
// when each first held after the heal (the slowest gateway of c's); a nemesis error when it
// does not within settle. It stops waiting once another fault that holds node will wait for
// it instead (room.leaveWait).
func (n *Nemesis) waitBack(c *claim, kind string, node *cluster.Node) {
	since := time.Since(c.healedAt)
	b, ok, err := n.C.WaitBack(n.stop(), node, settle, func() bool { return n.room.leaveWait(c, node.ID) })
	if err != nil {
		n.fail("after %s on %s: %v", kind, node.ID, err)
	}
	if ok {
		c.back.Leader, c.back.Alive = max(c.back.Leader, since+b.Leader), max(c.back.Alive, since+b.Alive)
	}
}

// waitCond polls cond every 100 ms until it holds, ctx ends, or d passes.
func waitCond(ctx context.Context, d time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// kill sends SIGKILL, optionally wipes the state directory, and restarts the node after d.
func (n *Nemesis) kill(ctx context.Context, node *cluster.Node, d time.Duration, wipe bool) {
	before := incarnation(n.C, node)
	reason := "kill"
	if wipe {
		reason = "wipe"
	}
	n.Rec.DownFrom(node.ID, reason, false)
	n.C.Kill(node)
	if wipe {
		if err := n.C.WipeState(node); err != nil {
			n.fail("wipe %s: %v", node.ID, err)
		}
	}
	wait(ctx, d)
	err := n.C.Restart(n.stop(), node)
	n.Rec.DownUntil(node.ID, reason)
	if err != nil {
		n.fail("restart %s: %v", node.ID, err)
		return
	}
	if node.Exited() {
		n.fail("%s exited right after its restart (see its log)", node.ID)
		return
	}
	if wipe && before != "" {
		if after := incarnation(n.C, node); after == before {
			n.fail("%s came back from a wiped state directory with its old incarnation %s", node.ID, before)
		}
	}
}

// incarnation is node's incarnation as the node itself publishes it ("" when unknown).
func incarnation(c *cluster.Cluster, node *cluster.Node) string {
	var p cluster.Peers
	if !cluster.GetJSON(node.URL()+"/mesh/peers", &p) {
		return ""
	}
	for _, peer := range p.Peers {
		if peer.ID == node.ID {
			return peer.Incarnation
		}
	}
	return ""
}

// pause stops the node for d, then resumes it.
func (n *Nemesis) pause(ctx context.Context, node *cluster.Node, d time.Duration) {
	n.Rec.DownFrom(node.ID, "pause", false)
	if err := n.C.Stop(node); err != nil {
		n.fail("SIGSTOP %s: %v", node.ID, err)
	}
	wait(ctx, d)
	if err := n.C.Cont(node); err != nil {
		n.fail("SIGCONT %s: %v", node.ID, err)
	}
	n.Rec.DownUntil(node.ID, "pause")
}

// partition cuts the cluster as p.kind says around t for p.hold, then heals:
//   - partition-one: the target alone against the rest;
//   - partition-minority: the target and as many others as keep the group a minority;
//   - partition-majority: a bridge, every gateway keeping a majority: the target's side and
//     the other side cannot talk, but one gateway talks to both;
//   - partition-oneway: packets from the target to the rest are dropped, theirs still arrive.
//
// It waits until every gateway it cut off is back.
func (n *Nemesis) partition(ctx context.Context, c *claim, p plan, t target) {
	if n.Regions != nil {
		n.regionCut(ctx, c, p, t)
		return
	}
	var cut *cluster.Cut
	var err error
	var off []*cluster.Node // the side recorded as cut off from the majority
	switch p.kind {
	case PartitionOne, PartitionMinority:
		off = t.a
		cut, err = n.both(t.a, t.b)
	case PartitionMajority:
		cut, err = n.both(t.a, t.b)
	case PartitionOneWay:
		cut, err = n.Net.Drop(nil, t.a, t.b)
	}
	desc := fmt.Sprintf("%v | %v", ids(t.a), ids(t.b))
	if t.bridge != nil {
		desc += " bridged by " + t.bridge.ID
	}
	n.say("%s on %s for %v: %s", p.kind, t.node.ID, p.hold.Round(time.Millisecond), desc)
	n.count(p.kind)
	if err != nil {
		n.fail("%s: %v", p.kind, err)
	}
	for _, o := range off {
		n.Rec.DownFrom(o.ID, p.kind, true)
	}
	wait(ctx, p.hold)
	if err := n.Net.Heal(cut); err != nil {
		n.fail("%v", err)
	}
	n.room.healed(c)
	for _, o := range off {
		n.Rec.DownUntil(o.ID, p.kind)
	}
	back := off
	if len(back) == 0 {
		back = []*cluster.Node{t.node}
	}
	for _, o := range back {
		n.waitBack(c, p.kind, o)
	}
}

func (n *Nemesis) both(a, b []*cluster.Node) (*cluster.Cut, error) {
	cut, err := n.Net.Drop(nil, a, b)
	if err != nil {
		return cut, err
	}
	return n.Net.Drop(cut, b, a)
}

// raftPort is every isolated gateway's --raft-port (cluster.New).
const raftPort = 39528

// leaderChange forces the raft leadership off leader, its process running: it drops the
// leader's packets to the others' raft port (the mesh, gRPC and the data plane still pass), so
// that they hear no heartbeat, until another gateway names a new leader, heals, and waits until
// the old leader follows. meshgw has no route that moves only the leadership (a drain of the
// leader hands it over, and leaves). A cut after which no other leader was elected within
// settle is counted as refused, not as a fault.
func (n *Nemesis) leaderChange(ctx context.Context, c *claim, leader *cluster.Node) {
	var others []*cluster.Node
	for _, o := range n.C.Nodes {
		if o != leader {
			others = append(others, o)
		}
	}
	// The leader's own raft requests (heartbeats, appends) are dropped; requests to it and its
	// answers still pass, so the new leader reaches it at once and it steps down.
	cut, err := n.Net.DropPort(nil, []*cluster.Node{leader}, others, raftPort)
	if err != nil {
		n.fail("%s: %v", LeaderTransfer, err)
	}
	start := time.Now()
	moved := ""
	_ = waitCond(ctx, settle, func() bool {
		for _, o := range others {
			var r cluster.Raft
			if o.Running() && cluster.GetJSON(o.URL()+"/mesh/raft", &r) && r.Leader != "" && r.Leader != leader.ID {
				moved = r.Leader
				return true
			}
		}
		return false
	})
	if moved != "" {
		n.say("%s from %s to %s in %v", LeaderTransfer, leader.ID, moved, time.Since(start).Round(time.Millisecond))
		n.count(LeaderTransfer)
	} else {
		n.say("%s from %s: no other leader within %v", LeaderTransfer, leader.ID, time.Since(start).Round(time.Millisecond))
		n.refuse(LeaderTransfer)
	}
	if err := n.Net.Heal(cut); err != nil {
		n.fail("%v", err)
	}
	n.room.healed(c)
	n.waitBack(c, LeaderTransfer, leader)
}

// drainClient bounds a drain's answer: the gateways' --drain-timeout-secs (20) and the write.
var drainClient = &http.Client{Timeout: 60 * time.Second}

// drain hands node over through via (POST /mesh/drain {"peer"}): its workers, raft leadership
// and voter seat go to the others, and it leaves; its data plane then answers new requests 503
// draining (the workload counts them apart) while those in flight finish. Then it is stopped
// and started again on its state directory: at once after the answer (the leader must then
// clear the mark of the process started again), or, when late, once
// the leader cleared its mark and d/2 later (an operator who waits). The fault ends when it is
// back and its mark is gone. The answer is logged; a refusal that wrote nothing is counted as
// refused, no answer is a nemesis error.
func (n *Nemesis) drain(ctx context.Context, c *claim, node, via *cluster.Node, d time.Duration, late bool) {
	when := "at once"
	if late {
		when = fmt.Sprintf("%v after its mark cleared", (d / 2).Round(time.Millisecond))
	}
	n.say("drain on %s through %s, restarted %s", node.ID, via.ID, when)
	if !n.sendDrain(node, via) {
		return
	}
	n.count(Drain)
	n.room.shrink(c, []string{node.ID}) // via may take other faults now
	if late {
		n.waitMarkCleared(node, "the answer")
		wait(ctx, d/2)
	}
	if !n.room.stop(n.stop(), c, node.ID) {
		return
	}
	n.Rec.DownFrom(node.ID, "drain-restart", false)
	n.C.Kill(node)
	err := n.C.Restart(n.stop(), node)
	n.Rec.DownUntil(node.ID, "drain-restart")
	n.room.healed(c)
	if err != nil {
		n.fail("restart %s after its drain: %v", node.ID, err)
		return
	}
	n.waitBack(c, Drain, node)
	if !late {
		n.waitMarkCleared(node, "the restart")
	}
}

// sendDrain posts the drain of node through via and logs the answer; false when the drain did
// not take (refused with nothing written: counted as refused; or no answer: a nemesis error).
func (n *Nemesis) sendDrain(node, via *cluster.Node) bool {
	req, err := http.NewRequestWithContext(n.stop(), "POST", via.URL()+"/mesh/drain",
		strings.NewReader(fmt.Sprintf(`{"peer":%q}`, node.ID)))
	if err != nil {
		n.fail("drain %s: %v", node.ID, err)
		return false
	}
	req.Header.Set("Authorization", "Bearer "+cluster.AdminKey)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := drainClient.Do(req)
	if err != nil {
		n.fail("drain %s through %s: %v", node.ID, via.ID, err)
		return true // it may have been written: the gateway is restarted as if drained
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	n.say("drain of %s through %s answered %d in %v %.200s", node.ID, via.ID, resp.StatusCode,
		time.Since(start).Round(time.Millisecond), body)
	switch resp.StatusCode {
	case 200, 202:
	case 503, 409, 404:
		// Refused, nothing written (no leader, a write timeout under a partition, no gateway
		// left to take over, a gateway the entry gateway's mesh does not list yet: it rejoined
		// while that one was cut off): the gateway was not drained.
		n.refuse(Drain)
		return false
	default:
		n.fail("drain %s through %s: %d %.200s", node.ID, via.ID, resp.StatusCode, body)
	}
	return true
}

// waitMarkCleared waits until the leader no longer lists node draining, and logs how long that
// took after what; a nemesis error when it still does after settle.
func (n *Nemesis) waitMarkCleared(node *cluster.Node, after string) {
	start := time.Now()
	if err := n.waitUnmarked(node, settle); err != nil {
		n.fail("the drain mark of %s, after %s: %v", node.ID, after, err)
		return
	}
	n.say("drain of %s: mark cleared %v after %s", node.ID, time.Since(start).Round(time.Millisecond), after)
}

// waitUnmarked waits until the leader's GET /mesh/drain (another running gateway's while none
// is known) no longer lists peer.
func (n *Nemesis) waitUnmarked(peer *cluster.Node, d time.Duration) error {
	err := waitCond(n.stop(), d, func() bool {
		ask := n.C.Node(n.C.Leader())
		if ask == nil || ask == peer || !ask.Running() {
			ask = nil
			for _, o := range n.C.Nodes {
				if o != peer && o.Running() {
					ask = o
					break
				}
			}
		}
		var ans struct {
			Draining []struct {
				Peer string `json:"peer"`
			} `json:"draining"`
		}
		if ask == nil || !cluster.GetJSON(ask.URL()+"/mesh/drain", &ans) {
			return false
		}
		for _, s := range ans.Draining {
			if s.Peer == peer.ID {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("still marked draining after %v", d)
	}
	return nil
}
