package nemesis

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/meshgw/meshgw/test/chaos/cluster"
)

// settle bounds the wait for the cluster to form again after a fault healed.
const settle = 45 * time.Second

// nodeLoop runs the gateway faults: process faults (kill, pause, wipe) and partitions on two
// loops side by side, each one fault at a time, so that they overlap (a kill during a
// partition). A wipe waits for quiet: no partition, every node alive, one leader.
func (n *Nemesis) nodeLoop(ctx context.Context, kinds []string) {
	var process, network []string
	for _, k := range kinds {
		if k == Kill || k == Pause || k == Wipe || k == Drain {
			process = append(process, k)
		} else {
			network = append(network, k)
		}
	}
	// Each loop draws from its own generator, seeded from the run's in a fixed order.
	prng := rand.New(rand.NewPCG(n.Rng.Uint64(), n.Rng.Uint64()))
	nrng := rand.New(rand.NewPCG(n.Rng.Uint64(), n.Rng.Uint64()))
	var wg sync.WaitGroup
	for _, l := range []struct {
		kinds []string
		rng   *rand.Rand
	}{{process, prng}, {network, nrng}} {
		if len(l.kinds) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.faultLoop(ctx, l.rng, l.kinds)
		}()
	}
	wg.Wait()
}

func (n *Nemesis) faultLoop(ctx context.Context, rng *rand.Rand, kinds []string) {
	for i := 0; i < 100000 && ctx.Err() == nil; i++ {
		k := kinds[rng.IntN(len(kinds))]
		d := hold(rng, n.Hold)
		if k == Wipe {
			// Quiet first: no partition starts until the wiped node is back.
			n.quiet.Lock()
			if err := n.C.WaitFormed(ctx, settle); err != nil {
				n.quiet.Unlock()
				continue
			}
		} else if k != Kill && k != Pause && k != Drain {
			n.quiet.RLock()
		}
		target := n.target(rng)
		n.Log("nemesis: %s on %s for %v", k, target.ID, d.Round(time.Millisecond))
		n.count(k)
		switch k {
		case Kill:
			n.kill(ctx, target, d, false)
		case Wipe:
			n.kill(ctx, target, d, true)
		case Pause:
			n.pause(ctx, target, d)
		case Drain:
			n.drain(ctx, target, d)
		default:
			n.partition(ctx, rng, k, target, d)
		}
		// Heal before this loop's next fault: the target sees a leader and another node sees
		// it alive (the other loop's fault may still hold).
		if err := n.C.WaitBack(n.stop(), target, settle); err != nil {
			n.fail("after %s on %s: %v", k, target.ID, err)
		}
		switch k {
		case Wipe:
			n.quiet.Unlock()
		case Kill, Pause, Drain:
		default:
			n.quiet.RUnlock()
		}
		wait(ctx, time.Duration(200+rng.IntN(800))*time.Millisecond)
	}
}

// target draws a node: the leader half of the time, so that elections happen.
func (n *Nemesis) target(rng *rand.Rand) *cluster.Node {
	if rng.IntN(2) == 0 {
		if l := n.C.Node(n.C.Leader()); l != nil {
			return l
		}
	}
	return n.C.Nodes[rng.IntN(len(n.C.Nodes))]
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

// partition cuts the cluster as kind says around target for d, then heals:
//   - partition-one: target alone against the rest;
//   - partition-minority: target and as many others as keep the group a minority;
//   - partition-majority: a bridge, every node keeping a majority: target's side and the other
//     side cannot talk, but one node talks to both;
//   - partition-oneway: packets from target to the rest are dropped, the others' still arrive.
func (n *Nemesis) partition(ctx context.Context, rng *rand.Rand, kind string, target *cluster.Node, d time.Duration) {
	others := []*cluster.Node{}
	for _, o := range n.C.Nodes {
		if o != target {
			others = append(others, o)
		}
	}
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	var a, b []*cluster.Node
	var cut []*cluster.Node // the side recorded as cut off from the majority
	var err error
	switch kind {
	case PartitionOne:
		a, b, cut = []*cluster.Node{target}, others, []*cluster.Node{target}
		err = n.both(a, b)
	case PartitionMinority:
		m := (len(n.C.Nodes)-1)/2 - 1
		a, b = append([]*cluster.Node{target}, others[:m]...), others[m:]
		cut = a
		err = n.both(a, b)
	case PartitionMajority:
		// others[0] bridges; the rest split in two halves around it.
		rest := others[1:]
		half := len(rest) / 2
		a, b = append([]*cluster.Node{target}, rest[:half]...), rest[half:]
		err = n.both(a, b)
	case PartitionOneWay:
		err = n.Net.Drop([]*cluster.Node{target}, others)
	}
	if err != nil {
		n.fail("%s: %v", kind, err)
	}
	for _, c := range cut {
		n.Rec.DownFrom(c.ID, kind, true)
	}
	wait(ctx, d)
	if err := n.Net.Heal(); err != nil {
		n.fail("%v", err)
	}
	for _, c := range cut {
		n.Rec.DownUntil(c.ID, kind)
	}
}

func (n *Nemesis) both(a, b []*cluster.Node) error {
	if err := n.Net.Drop(a, b); err != nil {
		return err
	}
	return n.Net.Drop(b, a)
}

// drainClient bounds a drain's answer: the gateways' --drain-timeout-secs (20) and the write.
var drainClient = &http.Client{Timeout: 60 * time.Second}

// drain hands node over through another gateway (POST /mesh/drain {"peer"}): its workers,
// raft leadership and voter seat go to the others, and it leaves; its data plane serves on.
// After d it is stopped and started again on its state directory, joining as a new gateway
// would. The answer is logged; a refusal or no answer is a nemesis error.
func (n *Nemesis) drain(ctx context.Context, node *cluster.Node, d time.Duration) {
	var via *cluster.Node
	for _, o := range n.C.Nodes {
		if o != node && o.Running() {
			via = o
			break
		}
	}
	if via == nil {
		n.fail("drain %s: no other gateway runs", node.ID)
		return
	}
	req, err := http.NewRequestWithContext(n.stop(), "POST", via.URL()+"/mesh/drain",
		strings.NewReader(fmt.Sprintf(`{"peer":%q}`, node.ID)))
	if err != nil {
		n.fail("drain %s: %v", node.ID, err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+cluster.AdminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := drainClient.Do(req)
	if err != nil {
		n.fail("drain %s through %s: %v", node.ID, via.ID, err)
	} else {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		n.Log("nemesis: drain of %s through %s answered %d %.200s", node.ID, via.ID, resp.StatusCode, body)
		switch resp.StatusCode {
		case 200, 202:
		case 503, 409:
			// Refused, nothing written (no leader, a write timeout under a partition, no
			// gateway left to take over): the gateway was not drained.
			return
		default:
			n.fail("drain %s through %s: %d %.200s", node.ID, via.ID, resp.StatusCode, body)
		}
	}
	// Restart it only once the leader has cleared its drain mark (it clears the marks of
	// gateways gone from the mesh and the configuration): a drained gateway started again while
	// still marked stays outside raft for good (docs/chaos.md, finding 5).
	if err := waitUnmarked(n.stop(), via, node.ID, settle); err != nil {
		n.fail("the drain mark of %s: %v", node.ID, err)
	}
	wait(ctx, d)
	n.Rec.DownFrom(node.ID, "drain-restart", false)
	n.C.Kill(node)
	err = n.C.Restart(n.stop(), node)
	n.Rec.DownUntil(node.ID, "drain-restart")
	if err != nil {
		n.fail("restart %s after its drain: %v", node.ID, err)
	}
}

// waitUnmarked waits until via's GET /mesh/drain no longer lists peer.
func waitUnmarked(ctx context.Context, via *cluster.Node, peer string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		var ans struct {
			Draining []struct {
				Peer string `json:"peer"`
			} `json:"draining"`
		}
		if cluster.GetJSON(via.URL()+"/mesh/drain", &ans) {
			marked := false
			for _, s := range ans.Draining {
				marked = marked || s.Peer == peer
			}
			if !marked {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still marked draining after %v", d)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
