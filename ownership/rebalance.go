package ownership

import (
	"cmp"
	"slices"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// PlanRebalance returns the fewest moves that even out ownership region by region, at time
// now. It is pure and deterministic: the order of workers and peers does not matter, and the
// moves come sorted by worker id.
//
// Rules:
//
//  1. A peer takes part when it is alive, not draining, and has been alive for at least settle
//     (a zero Since counts as settled): it receives, and its workers count. Workers of any other
//     owner are left alone: a gone owner's are failover's, a draining owner's are handoff's, and
//     a peer that is suspect or only just alive keeps what it has until it settles. Host-local
//     workers never move and do not count.
//  2. A worker belongs to its region: its spec's, else its owner's. The peers of a region that
//     take part share its workers: each gets the region's count divided by theirs, and as many
//     as the remainder get one more, given to the peers that own the most now (ties to the
//     lowest id). A region without such a peer is left alone.
//  3. A worker of a region owned by a peer of another region moves into its region. A peer over
//     its share gives the excess: its workers of the lowest rendezvous hash with it first. Each
//     worker given goes, in id order, to the peer under its share of the highest rendezvous
//     hash with it. So each region ends with counts that differ by at most one, after the least
//     number of moves that can achieve it.
func PlanRebalance(workers []Worker, peers []Peer, now time.Time, settle time.Duration) []Move {
	byID := peersByID(peers)
	part := make(map[string]bool)
	for _, p := range receivers(byID) {
		if p.Since.IsZero() || now.Sub(p.Since) >= settle {
			part[p.ID] = true
		}
	}
	// region -> its workers owned by peers that take part.
	regions := make(map[string][]Worker)
	for _, w := range workers {
		if w.HostLocal || !part[w.Owner] {
			continue
		}
		r := regionOf(w, byID)
		regions[r] = append(regions[r], w)
	}
	var moves []Move
	for region, ws := range regions {
		var local []string
		for id := range part {
			if byID[id].Region == region {
				local = append(local, id)
			}
		}
		if len(local) > 0 {
			moves = append(moves, balance(ws, local)...)
		}
	}
	slices.SortFunc(moves, func(a, b Move) int { return cmp.Compare(a.ID, b.ID) })
	return moves
}

// balance evens out ws over peers (rules 2 and 3 for one region).
func balance(ws []Worker, peers []string) []Move {
	owned := make(map[string][]Worker, len(peers))
	var excess []Worker
	isPeer := make(map[string]bool, len(peers))
	for _, p := range peers {
		isPeer[p] = true
	}
	for _, w := range ws {
		if isPeer[w.Owner] {
			owned[w.Owner] = append(owned[w.Owner], w)
		} else {
			excess = append(excess, w) // owned in another region
		}
	}
	// Shares: the peers that own the most get the remainder.
	slices.SortFunc(peers, func(a, b string) int {
		if c := cmp.Compare(len(owned[b]), len(owned[a])); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	share := make(map[string]int, len(peers))
	for i, p := range peers {
		share[p] = len(ws) / len(peers)
		if i < len(ws)%len(peers) {
			share[p]++
		}
	}
	for _, p := range peers {
		mine := owned[p]
		if len(mine) <= share[p] {
			continue
		}
		slices.SortFunc(mine, func(a, b Worker) int {
			if c := cmp.Compare(score(a.ID, p), score(b.ID, p)); c != 0 {
				return c
			}
			return cmp.Compare(a.ID, b.ID)
		})
		excess = append(excess, mine[:len(mine)-share[p]]...)
	}
	room := make(map[string]int, len(peers))
	var open []string
	for _, p := range peers {
		if n := share[p] - len(owned[p]); n > 0 {
			room[p] = n
			open = append(open, p)
		}
	}
	slices.Sort(open)
	slices.SortFunc(excess, func(a, b Worker) int { return cmp.Compare(a.ID, b.ID) })
	moves := make([]Move, 0, len(excess))
	for _, w := range excess {
		to := best(w.ID, open, room)
		room[to]--
		moves = append(moves, Move{ID: w.ID, From: w.Owner, Epoch: w.Epoch, To: to})
	}
	return moves
}

// best returns the peer of open with room left of the highest rendezvous score for id, ties to
// the lowest id. The shares add up to the region's workers, so there is always one.
func best(id worker.ID, open []string, room map[string]int) string {
	to, top, found := "", uint64(0), false
	for _, p := range open {
		if room[p] <= 0 {
			continue
		}
		if s := score(id, p); !found || s > top {
			to, top, found = p, s, true
		}
	}
	return to
}

// Counts returns how many workers each owner has, over every worker given.
func Counts(workers []Worker) map[string]int {
	out := make(map[string]int)
	for _, w := range workers {
		out[w.Owner]++
	}
	return out
}
