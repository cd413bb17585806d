package ownership

import (
	"cmp"
	"hash/fnv"
	"slices"
	"time"

	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/worker"
)

// DefaultFailoverGrace is --owner-failover-grace: how long an owner may be dead, left or
// unknown before its workers move.
const DefaultFailoverGrace = 10 * time.Second

// gone reports whether a peer's status lets its workers move once the grace ran out: dead,
// left, or unknown to the mesh. Alive and suspect peers, and the zero status, keep them.
func gone(s mesh.Status) bool {
	return s == mesh.StatusDead || s == mesh.StatusLeft || s == mesh.StatusUnknown
}

// Peer is one gateway as the mesh sees it. Foreign peers (another cluster id) must not be passed.
type Peer struct {
	// ID is the node id, the owner a record names.
	ID string
	// Region is the peer's --region; "" is a region like any other.
	Region string
	// Status is the peer's mesh status. Only alive peers receive workers. mesh.StatusUnknown
	// means the mesh does not list the peer; Since is then when the caller first missed it, and
	// a zero Since keeps its workers where they are.
	Status mesh.Status
	// Since is when the peer entered Status.
	Since time.Time
	// Draining says an operator drains the peer (DESIGN.md section 5, Handoff): it is given no
	// worker, and its workers move to the peers that are not draining.
	Draining bool
	// Started is when the peer's process started, from its node metadata (mesh.Meta.Started);
	// zero when unknown. A drain mark names the process it drains by it.
	Started time.Time
}

// Worker is one worker record as failover reads it.
type Worker struct {
	ID    worker.ID
	Owner string
	// Epoch is the record's fencing epoch; a move is valid only while it holds.
	Epoch uint64
	// Region is the spec's region; "" means the region of its owner.
	Region string
	// HostLocal marks a worker only its owner's host can reach (ZMQ over ipc://): never moved.
	HostLocal bool
}

// Move gives a worker to another owner, fenced by the owner and epoch it was planned on.
type Move struct {
	ID    worker.ID
	From  string
	Epoch uint64
	To    string
}

// PlanFailover returns the moves that give the workers of gone owners to live peers, at time
// now. It is pure and deterministic: the order of workers and peers does not matter (of two
// peers with one id, the later Since wins), and the moves come sorted by worker id.
//
// Rules:
//
//  1. An owner is gone when the peers list it dead, left or unknown (with a Since) for longer
//     than grace; exactly the grace is not longer. An alive or suspect owner, an owner gone for
//     less, and an owner that is neither listed nor given as unknown keep their workers.
//  2. A worker of a gone owner goes to the live (alive, not draining) peer of the highest
//     rendezvous hash of (worker id, peer id), ties to the lowest id, among the live peers of
//     the worker's region (its spec's, else its owner's) when there is one, else among every
//     live peer.
//  3. With no live peer, nothing moves. Host-local workers never move.
func PlanFailover(workers []Worker, peers []Peer, now time.Time, grace time.Duration) []Move {
	byID := peersByID(peers)
	live := receivers(byID)
	if len(live) == 0 {
		return nil
	}
	var moves []Move
	for _, w := range workers {
		owner, ok := byID[w.Owner]
		if w.HostLocal || !ok || !goneFor(owner, now, grace) {
			continue
		}
		if to := pick(w.ID, live, regionOf(w, byID)); to != "" && to != w.Owner {
			moves = append(moves, Move{ID: w.ID, From: w.Owner, Epoch: w.Epoch, To: to})
		}
	}
	slices.SortFunc(moves, func(a, b Move) int { return cmp.Compare(a.ID, b.ID) })
	return moves
}

// NextFailover returns the earliest time after now at which an owner of one of workers, gone
// but still within the grace, would be past it; ok is false when there is none. A runner wakes
// then, so that a failover does not wait for the next periodic pass.
func NextFailover(workers []Worker, peers []Peer, now time.Time, grace time.Duration) (at time.Time, ok bool) {
	byID := peersByID(peers)
	seen := make(map[string]bool)
	for _, w := range workers {
		if w.HostLocal || seen[w.Owner] {
			continue
		}
		seen[w.Owner] = true
		p, listed := byID[w.Owner]
		if !listed || !gone(p.Status) || p.Since.IsZero() || goneFor(p, now, grace) {
			continue
		}
		// The first instant that is longer than the grace.
		if t := p.Since.Add(grace + time.Nanosecond); !ok || t.Before(at) {
			at, ok = t, true
		}
	}
	return at, ok
}

// peersByID indexes peers by id; of two with one id, the later Since wins.
func peersByID(peers []Peer) map[string]Peer {
	byID := make(map[string]Peer, len(peers))
	for _, p := range peers {
		if cur, dup := byID[p.ID]; !dup || p.Since.After(cur.Since) {
			byID[p.ID] = p
		}
	}
	return byID
}

// receivers are the peers that may be given workers: alive and not draining, sorted by id.
func receivers(byID map[string]Peer) []Peer {
	var live []Peer
	for _, p := range byID {
		if p.Status == mesh.StatusAlive && !p.Draining {
			live = append(live, p)
		}
	}
	slices.SortFunc(live, func(a, b Peer) int { return cmp.Compare(a.ID, b.ID) })
	return live
}

// Pick is the owner a new worker gets by the rule failover uses: the live (alive, not draining)
// peer of the highest rendezvous hash of (worker id, peer id), those of region first; "" when
// no peer is live.
func Pick(id worker.ID, region string, peers []Peer) string {
	return pick(id, receivers(peersByID(peers)), region)
}

// regionOf is a worker's region: its spec's, else its owner's.
func regionOf(w Worker, byID map[string]Peer) string {
	if w.Region != "" {
		return w.Region
	}
	return byID[w.Owner].Region
}

// goneFor reports whether p has been gone for longer than grace at now.
func goneFor(p Peer, now time.Time, grace time.Duration) bool {
	return gone(p.Status) && !p.Since.IsZero() && now.Sub(p.Since) > grace
}

// pick returns the live peer (sorted by id) of the highest rendezvous score for id, preferring
// those of region.
func pick(id worker.ID, live []Peer, region string) string {
	best, bestScore, found := "", uint64(0), false
	for _, p := range live {
		if p.Region != region {
			continue
		}
		if s := score(id, p.ID); !found || s > bestScore {
			best, bestScore, found = p.ID, s, true
		}
	}
	if found {
		return best
	}
	for _, p := range live {
		if s := score(id, p.ID); !found || s > bestScore {
			best, bestScore, found = p.ID, s, true
		}
	}
	return best
}

// score is the rendezvous hash of (worker id, peer id): FNV-1a over both, separated by a zero
// byte, then a 64-bit finalizer (MurmurHash3's) so that ids that differ in a few characters
// still spread evenly.
func score(id worker.ID, peer string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(peer))
	return worker.Mix(h.Sum64())
}
