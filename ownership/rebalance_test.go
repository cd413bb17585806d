package ownership

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/worker"
)

// TestPlanRebalanceMinimal: over random fleets, a rebalance leaves every region balanced (counts
// differ by at most one) with exactly the least number of moves, and planning again moves nothing.
func TestPlanRebalanceMinimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	regions := []string{"", "eu", "us"}
	for round := range 300 {
		var peers []Peer
		for i := range 1 + rng.IntN(7) {
			peers = append(peers, peer(fmt.Sprintf("g%d", i), regions[rng.IntN(len(regions))], mesh.StatusAlive, t0))
		}
		var workers []Worker
		for i := range rng.IntN(60) {
			owner := peers[rng.IntN(len(peers))]
			region := ""
			if rng.IntN(3) == 0 {
				region = regions[rng.IntN(len(regions))]
			}
			workers = append(workers, w(fmt.Sprintf("w-%03d", i), owner.ID, uint64(i+1), region))
		}
		moves := PlanRebalance(workers, peers, t0, 0)
		if want := leastMoves(workers, peers); len(moves) != want {
			t.Fatalf("round %d: %d moves, the least is %d", round, len(moves), want)
		}
		after := applyMoves(workers, moves)
		if again := PlanRebalance(after, peers, t0, 0); len(again) != 0 {
			t.Fatalf("round %d: not balanced after the plan: %v", round, again)
		}
	}
}

// leastMoves is the lower bound, computed apart from PlanRebalance: per region with peers, every
// worker owned outside the region moves, and the region's peers, sorted by count, keep at most
// their share.
func leastMoves(workers []Worker, peers []Peer) int {
	byID := peersByID(peers)
	n := 0
	for _, region := range []string{"", "eu", "us"} {
		counts := make(map[string]int)
		var local []string
		for _, p := range peers {
			if p.Region == region {
				local = append(local, p.ID)
				counts[p.ID] = 0
			}
		}
		total := 0
		for _, w := range workers {
			if regionOf(w, byID) != region {
				continue
			}
			total++
			if _, in := counts[w.Owner]; in {
				counts[w.Owner]++
			}
		}
		if len(local) == 0 {
			continue
		}
		// Keep as much as the shares allow: the biggest owners take the bigger shares.
		var cs []int
		for _, c := range counts {
			cs = append(cs, c)
		}
		sortDesc(cs)
		kept := 0
		for i, c := range cs {
			share := total / len(local)
			if i < total%len(local) {
				share++
			}
			kept += min(c, share)
		}
		n += total - kept
	}
	return n
}

func sortDesc(a []int) { slices.SortFunc(a, func(x, y int) int { return y - x }) }

func applyMoves(workers []Worker, moves []Move) []Worker {
	to := make(map[worker.ID]string)
	for _, m := range moves {
		to[m.ID] = m.To
	}
	out := make([]Worker, len(workers))
	for i, w := range workers {
		if o, ok := to[w.ID]; ok {
			w.Owner = o
		}
		out[i] = w
	}
	return out
}

// TestPlanHandoffMatchesFailover: a draining owner's workers land where a failover of that
// owner would have put them.
func TestPlanHandoffMatchesFailover(t *testing.T) {
	var workers []Worker
	for i := range 100 {
		workers = append(workers, w(fmt.Sprintf("w-%03d", i), "blue", uint64(i+1), []string{"", "eu"}[i%2]))
	}
	peers := []Peer{peer("g1", "", mesh.StatusAlive, t0), peer("g2", "eu", mesh.StatusAlive, t0), peer("g3", "", mesh.StatusAlive, t0)}
	draining := append(peers, Peer{ID: "blue", Status: mesh.StatusAlive, Since: t0, Draining: true})
	dead := append(peers, peer("blue", "", mesh.StatusDead, t0.Add(-time.Hour)))
	moves, stuck := PlanHandoff(workers, draining)
	if len(stuck) != 0 {
		t.Fatalf("stuck: %v", stuck)
	}
	if d := cmp.Diff(PlanFailover(workers, dead, t0, grace), moves); d != "" {
		t.Errorf("handoff differs from failover (-failover +handoff):\n%s", d)
	}
}
