package nemesis

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/meshgw/meshgw/test/chaos/cluster"
)

// claim is what one fault holds while it runs, from its injection until its targets are back.
type claim struct {
	kind string
	// proc and net are the gateways the fault targets with its process (kill, pause) or its
	// network (partitions, a forced leader change): a gateway takes one fault of each at once
	// (rule 1), so that a kill may fall inside a partition.
	proc, net []string
	// only are the gateways the fault needs to itself (rule 1): a wiped or drained gateway, the
	// gateway a drain is sent through, the bridge of a partition-majority.
	only []string
	// stopped are the gateways whose process the fault killed or stopped, until it runs again
	// (rule 2). A drain's target only while it is restarted.
	stopped []string
	// down are the gateways out of raft (rule 3): stopped, or drained (its voter seat moves and
	// it leaves), or wiped (it votes for nobody until a leader confirmed it caught up).
	down []string
	// links are the pairs of gateways that cannot talk (both ways, or one way: raft needs both)
	// while the fault holds (rule 3).
	links [][2]string
	// engines are the engines the fault holds (one fault per engine).
	engines []string
	// healedAt is when its processes ran again and its cuts were gone (room.healed); back how
	// long its gateways then took to come back (the slowest of them). Only the fault's own
	// goroutine reads them, once healed.
	healedAt time.Time
	back     cluster.Back
	// waitLeft are the gateways of c whose coming back another fault waits for (leaveWait).
	waitLeft []string
}

// touches returns every gateway c targets.
func (c *claim) touches() []string {
	return append(append(slices.Clone(c.only), c.proc...), c.net...)
}

// overlaps reports whether c and h may not hold at once by rule 1.
func (c *claim) overlaps(h *claim) bool {
	shares := func(a, b []string) bool {
		for _, g := range a {
			if slices.Contains(b, g) {
				return true
			}
		}
		return false
	}
	return shares(c.only, h.touches()) || shares(h.only, c.touches()) || shares(c.proc, h.proc) ||
		shares(c.net, h.net) || shares(c.engines, h.engines)
}

// room decides which faults may hold at once, so that faults overlap as much as they may
// while the cluster can still make progress:
//
//  1. A gateway takes at most one process fault (kill, pause) and one network fault
//     (partition, forced leader change) at once; a wipe, a drain's target and the bridge of a
//     partition-majority have their gateways to themselves, and the gateway a drain is sent
//     through lends its process until it answers. An engine takes one fault at a time.
//  2. Process faults (kill, pause, wipe, a drain's restart) hold at most ⌊(n−1)/2⌋ gateways
//     stopped at once: a majority of the gateways' processes always runs.
//  3. Raft keeps a quorum through every fault that holds: some voter that is up reaches a
//     majority of the voters (itself included) that are up, with no cut between them, and
//     so it would with a wiped non-voter promoted as it went down. This is
//     what serializes the faults that affect the quorum (a kill of the leader waits while
//     another voter is cut off, and picks a non-voter instead when its draw allows). A
//     partition of a group is allowed when the quorum survives on either side of it: that is
//     the fault.
//  4. One wipe at a time: a wiped gateway holds its claim until a leader confirmed it caught up
//     (two lost disks among the voters is beyond what raft promises).
//
// Gateway faults take turns by count (turnLocked): a kind that has had more than lead faults
// more than another kind now waiting for room lets that one go first, and a kind that starved
// holds back those with as many faults that came after it, so that the faults that need much
// room (a partition of a minority needs two gateways at once, a forced leader change the leader
// and a quorum without it, a drain a calm gateway to go through) are not starved by those that
// need little, and every kind ends with about as many faults. Engine faults only wait for their
// engine.
type room struct {
	nodes []string
	// view returns the raft leader and voters ("" and nil when no gateway names a leader).
	view func() (leader string, voters []string)

	mu       sync.Mutex
	changed  chan struct{}
	claims   map[*claim]bool
	lanes    map[string]int       // lanes of each kind (a kind with k lanes may lead by k−1)
	admitted map[string]int       // faults let in, by kind of gateway fault
	waiting  map[string]int       // lanes of each kind of gateway fault waiting for room
	since    map[string]time.Time // since when each kind in waiting has waited
	running  map[string]int       // claims held, by kind
	voters   []string
	leader   string
	viewedAt time.Time
}

// lead is how many more faults a kind of gateway fault may have had than one that waits.
const lead = 2

// starved is how long a kind of gateway fault with none running waits for room before the kinds
// with as many faults or more that came to wait after it hold back for it (turnLocked).
const starved = 750 * time.Millisecond

func newRoom(nodes []string, view func() (string, []string)) *room {
	return &room{nodes: nodes, view: view, changed: make(chan struct{}), claims: map[*claim]bool{},
		admitted: map[string]int{}, waiting: map[string]int{}, since: map[string]time.Time{}, running: map[string]int{}}
}

// offer is what a fault's pick function sees: the leader, whether a claim fits now, and
// whether a gateway is calm: in no fault, and not cut from the leader.
type offer struct {
	Leader string
	fits   func(*claim) bool
	calm   func(gateway string) bool
}

// acquire waits until pick returns a claim that fits with those held, holds it and returns
// it, with how long it waited for its turn (the rest of its wait was for room); nil when ctx
// ended first. pick is called with the room locked: it must not block. lane names the
// caller's kind; gateway says its faults hit gateways (the others wait for no one's turn).
func (r *room) acquire(ctx context.Context, lane string, gateway bool, pick func(offer) *claim) (*claim, time.Duration) {
	var turn time.Duration
	r.mu.Lock()
	if gateway {
		if r.waiting[lane]++; r.waiting[lane] == 1 {
			r.since[lane] = time.Now()
		}
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if gateway {
			if r.waiting[lane]--; r.waiting[lane] <= 0 {
				delete(r.waiting, lane)
				delete(r.since, lane)
			}
		}
		r.signalLocked()
		r.mu.Unlock()
	}()
	for {
		leader, voters := r.refresh()
		r.mu.Lock()
		mine := !gateway || r.turnLocked(lane, time.Now())
		if mine {
			held := r.heldLocked()
			calm := func(g string) bool { return r.calmLocked(g, leader) }
			c := pick(offer{Leader: leader, calm: calm, fits: func(c *claim) bool { return fits(held, c, r.nodes, voters) }})
			if c != nil {
				r.claims[c] = true
				r.running[c.kind]++
				if gateway {
					r.admitted[lane]++
				}
				r.mu.Unlock()
				return c, turn
			}
		}
		ch := r.changed
		r.mu.Unlock()
		t := time.NewTimer(250 * time.Millisecond) // raft's view changes without a release
		waited := time.Now()
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, turn
		case <-ch:
		case <-t.C:
		}
		t.Stop()
		if !mine {
			turn += time.Since(waited)
		}
	}
}

// turnLocked reports whether lane may take room now: it has had at most lead faults more than
// every gateway lane waiting (one more per lane of its kind past the first, so that a kind
// given two lanes runs two faults at once), and no kind with as many faults that has waited longer than
// starved came to wait before it. The second rule is for the kinds that need much room at once
// (a drain needs two gateways in no fault, a forced leader change the leader and a quorum
// without it): among kinds with as many faults, those that need little would take every
// gateway as it frees up, and the wide ones would wait for a moment when enough are free at
// once. Once one has starved, the others of its count hold back until it got in; those that
// are behind it still go. A kind with a fault running does not starve: its other lanes wait for
// that one (two forced leader changes need the same leader), which holding back helps nothing.
func (r *room) turnLocked(lane string, now time.Time) bool {
	for w := range r.waiting {
		if w == lane {
			continue
		}
		if r.admitted[lane] > r.admitted[w]+lead+max(r.lanes[lane]-1, 0) {
			return false
		}
		if r.running[w] == 0 && r.admitted[lane] >= r.admitted[w] && now.Sub(r.since[w]) > starved && r.since[w].Before(r.since[lane]) {
			return false
		}
	}
	return true
}

// refused takes back a turn of lane: its fault did not take (a drain refused), so it does not
// count against the lanes waiting.
func (r *room) refused(lane string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.admitted[lane]--
}

func (r *room) heldLocked() []*claim {
	held := make([]*claim, 0, len(r.claims))
	for h := range r.claims {
		held = append(held, h)
	}
	return held
}

// refresh returns the raft view, read again when older than 300 ms. The last one is kept while
// no gateway names a leader.
func (r *room) refresh() (string, []string) {
	r.mu.Lock()
	fresh := time.Since(r.viewedAt) < 300*time.Millisecond
	leader, voters := r.leader, r.voters
	r.mu.Unlock()
	if fresh {
		return leader, voters
	}
	l, v := r.view()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.viewedAt = time.Now()
	r.leader = l
	if len(v) > 0 {
		r.voters = v
	}
	return r.leader, r.voters
}

// shrink lets c go of the gateways not in keep (a drain's entry gateway once it answered).
func (r *room) shrink(c *claim, keep []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.only = slices.DeleteFunc(c.only, func(g string) bool { return !slices.Contains(keep, g) })
	c.proc = slices.DeleteFunc(c.proc, func(g string) bool { return !slices.Contains(keep, g) })
	r.signalLocked()
}

// stop waits until the room lets c stop gateway g too (rule 2: a drain restarts its target),
// and records it; false when ctx ended first.
func (r *room) stop(ctx context.Context, c *claim, g string) bool {
	for {
		r.mu.Lock()
		if r.stoppedLocked()+1 <= (len(r.nodes)-1)/2 {
			c.stopped = append(c.stopped, g)
			r.mu.Unlock()
			return true
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

func (r *room) stoppedLocked() int {
	n := 0
	for h := range r.claims {
		n += len(h.stopped)
	}
	return n
}

// healed lets c go of its hold on the quorum (rules 2 and 3: its gateways run again and its
// cuts are gone) while it still holds its gateways (rule 1) until they are back in the mesh.
// A wipe keeps its target down until a leader confirmed it caught up: it votes for nobody
// before. A drain keeps its target down until it is back: it left raft, and comes back as a
// non-voter that a leader must add and promote, while the raft view the room last read may
// still name it a voter.
func (r *room) healed(c *claim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.healedAt = time.Now()
	c.stopped = nil
	if c.kind != Wipe && c.kind != Drain {
		c.down = nil
	}
	c.links = nil
	r.signalLocked()
}

// leaveWait reports whether another fault will wait for gateway g to come back, so that c need
// not: c cuts g off while another fault holds g's process (it restarts or resumes it, then
// waits), or c holds g's process while another fault's cuts of g still hold (it heals them,
// then waits). The choice is recorded in c under the lock, so two faults never leave the wait
// for g to each other; a wipe and a drain hold their gateway to themselves and never stack.
func (r *room) leaveWait(c *claim, g string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Contains(c.waitLeft, g) {
		return true
	}
	for h := range r.claims {
		if h == c || slices.Contains(h.waitLeft, g) {
			continue
		}
		procHeld := slices.Contains(h.proc, g) || slices.Contains(h.only, g)
		stillCut := slices.Contains(h.net, g) && len(h.links) > 0
		if (slices.Contains(c.net, g) && procHeld) || (slices.Contains(c.proc, g) && stillCut) {
			c.waitLeft = append(c.waitLeft, g)
			return true
		}
	}
	return false
}

// release ends c.
func (r *room) release(c *claim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.claims[c] {
		r.running[c.kind]--
	}
	delete(r.claims, c)
	r.signalLocked()
}

func (r *room) signalLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// held returns the gateways faults target, with the kinds, for the progress line.
func (r *room) held() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for c := range r.claims {
		for _, g := range c.touches() {
			if out[g] != "" {
				out[g] += "+"
			}
			out[g] += c.kind
		}
	}
	return out
}

// calmLocked reports whether gateway g is in no fault and not cut from leader.
func (r *room) calmLocked(g, leader string) bool {
	for c := range r.claims {
		if slices.Contains(c.touches(), g) || slices.Contains(c.down, g) {
			return false
		}
		for _, l := range c.links {
			if l == [2]string{g, leader} || l == [2]string{leader, g} {
				return false
			}
		}
	}
	return true
}

// fits applies the room's rules to c beside the claims held, among nodes with these voters
// (every node when the voters are unknown).
func fits(held []*claim, c *claim, nodes, voters []string) bool {
	stopped := len(c.stopped)
	for _, h := range held {
		if c.overlaps(h) {
			return false // rule 1
		}
		stopped += len(h.stopped)
		if c.kind == Wipe && h.kind == Wipe {
			return false // rule 4
		}
	}
	if len(c.stopped) > 0 && stopped > (len(nodes)-1)/2 {
		return false // rule 2
	}
	if len(c.down) == 0 && len(c.links) == 0 {
		return true
	}
	if len(voters) == 0 {
		voters = nodes
	}
	claims := append(slices.Clone(held), c)
	if !quorum(claims, voters) {
		return false
	}
	// A wiped non-voter may have been promoted as it went down: the leader fills the voter
	// seats from the gateways it sees alive, and a gateway stopped a moment ago still looks
	// alive (seed 99 promoted n1 0.3 s into its wipe), while the raft view this room reads may
	// not show it for a while (it keeps the last one while no gateway names a leader). A wiped
	// voter votes for nobody until a leader confirmed it caught up, and no leader may come
	// without its vote: that is for good, where a kill ends when the process is back. So the
	// quorum must also hold with a wiped gateway a voter.
	for _, h := range claims {
		if h.kind != Wipe {
			continue
		}
		for _, g := range h.down {
			if !slices.Contains(voters, g) && !quorum(claims, append(slices.Clone(voters), g)) {
				return false
			}
		}
	}
	return true
}

// quorum reports whether, with every claim holding, some voter that is up reaches a majority
// of the voters, itself included, with no cut between it and each of them (rule 3).
//
// A cut counts both ways. A voter whose packets to the others are dropped while theirs reach
// it (a forced leader change, a partition-oneway) hears every candidate and refuses one whose
// log is shorter than its own, and its answers never arrive: it is no vote for a new leader,
// and it cannot lead. It still counts among the voters whose majority a leader needs, as a
// voter that is down does.
func quorum(claims []*claim, voters []string) bool {
	down := map[string]bool{}
	cut := map[[2]string]bool{}
	for _, c := range claims {
		for _, g := range c.down {
			down[g] = true
		}
		for _, l := range c.links {
			cut[l] = true
			cut[[2]string{l[1], l[0]}] = true
		}
	}
	need := len(voters)/2 + 1
	for _, l := range voters {
		if down[l] {
			continue
		}
		reach := 1
		for _, v := range voters {
			if v != l && !down[v] && !cut[[2]string{l, v}] {
				reach++
			}
		}
		if reach >= need {
			return true
		}
	}
	return false
}
