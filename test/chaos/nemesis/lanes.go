package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshgw/meshgw/ctxtime"
	"github.com/meshgw/meshgw/test/chaos/cluster"
)

// maxFaults bounds each lane's count of faults, whatever the duration.
const maxFaults = 100000

// lane is one loop of faults of one kind, one at a time, drawn from its own generator.
type lane struct {
	kind string
	rng  *rand.Rand
}

// extraLanes are the lanes some kinds get on 5 gateways or more beyond their first, in this
// order. A drain takes the longest (the handover, the leave, the restart) and needs its gateway
// to itself and a calm one to go through; a forced leader change needs the leader free of
// network faults and the other voters up and together; a wipe needs its gateway to itself, and
// holds it until a leader confirmed it caught up. They wait for room or hold it longer than the
// others, and by the turns every kind would go at their pace. Two forced leader changes never
// hold at once (there is one leader), nor two wipes (rule 4): the second lane waits for room
// while the first runs, so that one starts as soon as the last is over.
var extraLanes = []struct {
	kind string
	n    int
}{{Drain, 2}, {LeaderTransfer, 1}, {Wipe, 1}}

// lanes returns a lane per planned kind, and the extra lanes on 5 gateways or more. Every
// lane's generator is seeded from the run's in the order of All, planned or not, then the
// extra lanes' in the order of extraLanes, so that a lane's draws depend neither on the timing
// of the others' nor on which kinds FAULTS names.
func (n *Nemesis) lanes(kinds []string) []lane {
	var out []lane
	seed := func() *rand.Rand { return rand.New(rand.NewPCG(n.Rng.Uint64(), n.Rng.Uint64())) }
	for _, k := range All {
		rng := seed()
		if slices.Contains(kinds, k) {
			out = append(out, lane{kind: k, rng: rng})
		}
	}
	for _, e := range extraLanes {
		for range e.n {
			if rng := seed(); slices.Contains(kinds, e.kind) && len(n.C.Nodes) >= 5 {
				out = append(out, lane{kind: e.kind, rng: rng})
			}
		}
	}
	return out
}

// Run injects the planned faults until ctx ends, a lane per kind, side by side under the room's
// rules (room.go); each fault is healed before Run returns.
func (n *Nemesis) Run(ctx context.Context, kinds []string) {
	ids := make([]string, len(n.C.Nodes))
	for i, node := range n.C.Nodes {
		ids[i] = node.ID
	}
	n.room = newRoom(ids, func() (string, []string) {
		leader, voters, _ := n.C.RaftView()
		return leader, voters
	})
	ls := n.lanes(kinds)
	n.room.lanes = map[string]int{}
	for _, l := range ls {
		n.room.lanes[l.kind]++
	}
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() { n.runLane(ctx, l) })
	}
	wg.Wait()
	if n.Net != nil {
		if err := n.Net.HealAll(); err != nil {
			n.fail("%v", err)
		}
	}
}

// plan is one fault's draws, made before it waits for room so that every fault draws the same
// number of values whatever the cluster's state.
type plan struct {
	kind   string
	hold   time.Duration
	leader bool  // target the leader when it may
	order  []int // the targets to try (gateways or engines), in this order
	others []int // the order of the other gateways, for the sides of a partition
	late   bool  // a drain's restart waits for the leader to clear its mark (one in four)
	gap    time.Duration
}

func (n *Nemesis) runLane(ctx context.Context, l lane) {
	for i := 0; i < maxFaults && ctx.Err() == nil; i++ {
		p := plan{kind: l.kind}
		p.hold = hold(l.rng, n.Hold)
		p.leader = l.rng.IntN(3) == 0
		p.order = l.rng.Perm(max(len(n.C.Nodes), len(n.C.Engines)))
		p.others = l.rng.Perm(len(n.C.Nodes) - 1)
		p.late = l.rng.IntN(4) == 0
		p.gap = time.Duration(20+l.rng.IntN(100)) * time.Millisecond
		n.inject(ctx, p)
		wait(ctx, p.gap)
	}
}

// inject runs one fault: it waits for room, injects, holds, heals, waits for the targets to be
// back, and lets the room go.
func (n *Nemesis) inject(ctx context.Context, p plan) {
	var t target
	asked := time.Now()
	c, turn := n.room.acquire(ctx, p.kind, !slices.Contains(engineKinds, p.kind), func(o offer) *claim {
		var c *claim
		t, c = n.pick(p, o)
		return c
	})
	if c == nil {
		return
	}
	start := time.Now()
	defer func() {
		n.room.release(c)
		n.over(p.kind, c, start, start.Sub(asked), turn)
	}()
	switch p.kind {
	case Kill, Wipe, Pause:
		n.processFault(ctx, c, p, t.node)
	case Drain:
		n.drain(ctx, c, t.node, t.via, p.hold, p.late)
	case LeaderTransfer:
		n.leaderChange(ctx, c, t.node)
	case PartitionOne, PartitionMinority, PartitionMajority, PartitionOneWay:
		n.partition(ctx, c, p, t)
	case EngineFlap, EngineHang, WeightFail:
		n.engineFault(ctx, p, t.engine)
	}
}

// over logs the end of a fault that started at start after waiting for room, with its phases
// for a gateway fault (held until the heal, then back), and adds its times to the kind's.
func (n *Nemesis) over(kind string, c *claim, start time.Time, waited, turn time.Duration) {
	took := time.Since(start)
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
	phases, back := "", time.Duration(0)
	if !c.healedAt.IsZero() {
		back = time.Since(c.healedAt)
		phases = fmt.Sprintf(": healed after %v, back %v later (leader +%v, seen alive +%v)",
			r(c.healedAt.Sub(start)), r(back), r(c.back.Leader), r(c.back.Alive))
	}
	if len(c.waitLeft) > 0 {
		phases += fmt.Sprintf(", %s handed to another fault", strings.Join(c.waitLeft, ","))
	}
	n.say("%s on %s over after %v%s (waited %v for room, %v of it for its turn)", kind, strings.Join(append(c.touches(), c.engines...), ","),
		r(took), phases, r(waited), r(turn))
	n.mu.Lock()
	n.took[kind] += took
	n.waited[kind] += waited
	if phases != "" {
		n.back[kind] += back
		n.turns[kind] += turn
	}
	n.mu.Unlock()
}

// target is what a fault hits.
type target struct {
	node   *cluster.Node
	via    *cluster.Node   // a drain's entry gateway
	a, b   []*cluster.Node // a partition's sides (a one-way cut drops what a sends to b)
	bridge *cluster.Node   // a partition-majority's gateway that talks to both sides
	engine string
}

// pick returns the first target in p's order whose claim fits: the leader first when p says so
// (a third of the gateway faults, so that elections happen beside the forced leader changes),
// then p.order; a partition of a minority or a majority also tries the other gateways, in
// p's order rotated, for its group or its bridge. A forced leader change always targets the
// leader.
func (n *Nemesis) pick(p plan, o offer) (target, *claim) {
	switch p.kind {
	case EngineFlap, EngineHang, WeightFail:
		for _, i := range p.order {
			e := ""
			switch {
			case p.kind == WeightFail:
				e = n.WeightEngine
			case i < len(n.C.Engines):
				e = n.C.Engines[i].URL()
			}
			if c := (&claim{kind: p.kind, engines: []string{e}}); e != "" && o.fits(c) {
				return target{engine: e}, c
			}
		}
		return target{}, nil
	}
	var cands []*cluster.Node
	if l := n.C.Node(o.Leader); l != nil && (p.leader || p.kind == LeaderTransfer) {
		cands = append(cands, l)
	}
	if p.kind != LeaderTransfer {
		for _, i := range p.order {
			if i < len(n.C.Nodes) {
				cands = append(cands, n.C.Nodes[i])
			}
		}
	}
	rotations := 1
	if p.kind == PartitionMinority || p.kind == PartitionMajority {
		rotations = len(n.C.Nodes) - 1 // the other gateways of the group, or the bridge, too
	}
	for _, node := range cands {
		for rot := range rotations {
			t, c := n.claimFor(p, node, rot, o)
			if c != nil && o.fits(c) {
				return t, c
			}
		}
	}
	return target{}, nil
}

// claimFor is the claim of p's fault on node, with p's order of the other gateways rotated by
// rot.
func (n *Nemesis) claimFor(p plan, node *cluster.Node, rot int, o offer) (target, *claim) {
	c := &claim{kind: p.kind}
	t := target{node: node}
	others := n.others(p, node)
	others = append(others[rot:], others[:rot]...)
	switch p.kind {
	case Kill, Pause, Wipe:
		if !node.Running() {
			return t, nil
		}
		c.proc, c.stopped, c.down = []string{node.ID}, []string{node.ID}, []string{node.ID}
		if p.kind == Wipe {
			// Restarted from nothing inside a partition, it could not join: it needs calm.
			c.proc, c.only = nil, []string{node.ID}
		}
	case Drain:
		// Sent through the first other gateway that runs, in no fault and not cut from the
		// leader (it would refuse it). Until it answers, the entry gateway's process is held
		// (a kill would lose the answer); a partition may still fall on it, and the drain may
		// then be refused.
		for _, v := range others {
			if v.Running() && o.calm(v.ID) {
				t.via = v
				break
			}
		}
		if t.via == nil || !node.Running() || o.Leader == "" {
			return t, nil
		}
		c.only, c.proc, c.down = []string{node.ID}, []string{t.via.ID}, []string{node.ID}
	case LeaderTransfer:
		if !node.Running() {
			return t, nil // a leader stopped or killed is not moved off: it is gone
		}
		c.net = []string{node.ID}
		c.links = links([]*cluster.Node{node}, others)
	case PartitionOne, PartitionOneWay:
		if n.Regions != nil {
			// The target's whole region: the bed cuts nothing finer.
			t.a, t.b = sameRegion(n.C.Nodes, node.Region)
			if len(t.b) == 0 {
				return t, nil
			}
			c.net, c.links = ids(t.a), links(t.a, t.b)
			break
		}
		t.a, t.b = []*cluster.Node{node}, others
		c.net = []string{node.ID}
		c.links = links(t.a, t.b)
	case PartitionMinority:
		m := (len(n.C.Nodes)-1)/2 - 1
		t.a, t.b = append([]*cluster.Node{node}, others[:m]...), others[m:]
		c.net = ids(t.a)
		c.links = links(t.a, t.b)
	case PartitionMajority:
		// others[0] bridges; the rest split in two halves around it. The bridge is held to
		// itself: every gateway keeps a majority in view only through it.
		rest := others[1:]
		half := len(rest) / 2
		t.bridge = others[0]
		t.a, t.b = append([]*cluster.Node{node}, rest[:half]...), rest[half:]
		c.net, c.only = []string{node.ID}, []string{t.bridge.ID}
		c.links = links(t.a, t.b)
	}
	return t, c
}

// others are the gateways but node, in p's drawn order.
func (n *Nemesis) others(p plan, node *cluster.Node) []*cluster.Node {
	var rest []*cluster.Node
	for _, o := range n.C.Nodes {
		if o != node {
			rest = append(rest, o)
		}
	}
	out := make([]*cluster.Node, 0, len(rest))
	for _, i := range p.others {
		out = append(out, rest[i])
	}
	return out
}

func links(a, b []*cluster.Node) [][2]string {
	var out [][2]string
	for _, x := range a {
		for _, y := range b {
			out = append(out, [2]string{x.ID, y.ID})
		}
	}
	return out
}

func ids(nodes []*cluster.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

// stop is the context of the heals' waits.
func (n *Nemesis) stop() context.Context {
	if n.Stop == nil {
		return context.Background()
	}
	return n.Stop
}

// hold draws a fault's length: in [max/3, max/2], and one time in ten in [2×max, 3×max]. With
// the default 3 s, every fault lasts at least a second (raft's heartbeat timeout, memberlist's
// probe interval), and every long one (6 to 9 s) outlasts the failure detector (about 2 to 4 s)
// and the failover grace (3 s), so failovers happen. It always draws twice.
func hold(rng *rand.Rand, max time.Duration) time.Duration {
	long := rng.IntN(10) == 0
	if long {
		return 2*max + time.Duration(rng.Int64N(int64(max)+1))
	}
	return max/3 + time.Duration(rng.Int64N(int64(max/6)+1))
}

// wait waits d, or less when ctx ends (faults are healed at once then).
func wait(ctx context.Context, d time.Duration) { _ = ctxtime.Sleep(ctx, d) }
