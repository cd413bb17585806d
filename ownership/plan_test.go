package ownership

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/worker"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const grace = 10 * time.Second

func w(id, owner string, epoch uint64, region string) Worker {
	return Worker{ID: worker.ID(id), Owner: owner, Epoch: epoch, Region: region}
}

func peer(id, region string, s mesh.Status, since time.Time) Peer {
	return Peer{ID: id, Region: region, Status: s, Since: since}
}

// target returns the peer PlanFailover gives id to among ids (all alive, one region).
func target(id string, ids ...string) string {
	var live []Peer
	for _, p := range ids {
		live = append(live, peer(p, "", mesh.StatusAlive, t0))
	}
	return pick(worker.ID(id), live, "")
}

func TestPlanFailover(t *testing.T) {
	alive := func(id, region string) Peer { return peer(id, region, mesh.StatusAlive, t0.Add(-time.Hour)) }
	gone := func(id, region string, s mesh.Status, ago time.Duration) Peer {
		return peer(id, region, s, t0.Add(-ago))
	}
	two := []Worker{w("w-a", "g2", 5, ""), w("w-b", "g2", 6, "")}
	to := func(id string, epoch uint64, peers ...string) Move {
		return Move{ID: worker.ID(id), From: "g2", Epoch: epoch, To: target(id, peers...)}
	}
	tests := []struct {
		name    string
		workers []Worker
		peers   []Peer
		want    []Move
	}{
		{"alive owner keeps", two, []Peer{alive("g1", ""), alive("g2", ""), alive("g3", "")}, nil},
		{"suspect owner keeps", two, []Peer{alive("g1", ""), gone("g2", "", mesh.StatusSuspect, time.Hour)}, nil},
		{"status zero keeps", two, []Peer{alive("g1", ""), gone("g2", "", 0, time.Hour)}, nil},
		{"dead within grace keeps", two, []Peer{alive("g1", ""), gone("g2", "", mesh.StatusDead, grace-time.Second)}, nil},
		{"dead exactly the grace keeps", two, []Peer{alive("g1", ""), gone("g2", "", mesh.StatusDead, grace)}, nil},
		{"dead past the grace moves", two,
			[]Peer{alive("g1", ""), gone("g2", "", mesh.StatusDead, grace+time.Nanosecond), alive("g3", "")},
			[]Move{to("w-a", 5, "g1", "g3"), to("w-b", 6, "g1", "g3")}},
		{"left past the grace moves", two,
			[]Peer{alive("g1", ""), gone("g2", "", mesh.StatusLeft, time.Minute)},
			[]Move{to("w-a", 5, "g1"), to("w-b", 6, "g1")}},
		{"unknown recent keeps", two, []Peer{alive("g1", ""), gone("g2", "", mesh.StatusUnknown, time.Second)}, nil},
		{"unknown without since keeps", two, []Peer{alive("g1", ""), {ID: "g2", Status: mesh.StatusUnknown}}, nil},
		{"unknown past the grace moves", two,
			[]Peer{alive("g1", ""), gone("g2", "", mesh.StatusUnknown, time.Minute)},
			[]Move{to("w-a", 5, "g1"), to("w-b", 6, "g1")}},
		{"unlisted owner keeps", two, []Peer{alive("g1", "")}, nil},
		{"no live peer moves nothing", two,
			[]Peer{gone("g1", "", mesh.StatusSuspect, time.Hour), gone("g2", "", mesh.StatusDead, time.Hour),
				gone("g3", "", mesh.StatusLeft, time.Hour)}, nil},
		{"never to a dead or left peer", two,
			[]Peer{gone("g1", "", mesh.StatusDead, time.Hour), gone("g2", "", mesh.StatusDead, time.Hour),
				gone("g3", "", mesh.StatusLeft, time.Hour), alive("g4", "")},
			[]Move{to("w-a", 5, "g4"), to("w-b", 6, "g4")}},
		{"the worker's region first", []Worker{w("w-a", "g2", 5, "eu"), w("w-b", "g2", 6, "us")},
			[]Peer{alive("g1", "us"), gone("g2", "us", mesh.StatusDead, time.Hour), alive("g3", "eu"), alive("g4", "eu")},
			[]Move{to("w-a", 5, "g3", "g4"), to("w-b", 6, "g1")}},
		{"no spec region: the owner's region", two,
			[]Peer{alive("g1", "us"), gone("g2", "eu", mesh.StatusDead, time.Hour), alive("g3", "eu")},
			[]Move{to("w-a", 5, "g3"), to("w-b", 6, "g3")}},
		{"region without a live peer: any live peer", []Worker{w("w-a", "g2", 5, "ap")},
			[]Peer{alive("g1", "us"), gone("g2", "ap", mesh.StatusDead, time.Hour), alive("g3", "eu")},
			[]Move{to("w-a", 5, "g1", "g3")}},
		{"host-local never moves", []Worker{{ID: "w-ipc", Owner: "g2", Epoch: 1, HostLocal: true}},
			[]Peer{alive("g1", ""), gone("g2", "", mesh.StatusDead, time.Hour)}, nil},
		{"a duplicate peer: the later since wins", two,
			[]Peer{alive("g1", ""), peer("g2", "", mesh.StatusAlive, t0), gone("g2", "", mesh.StatusDead, time.Hour)}, nil},
		{"only the gone owner's workers", []Worker{w("w-a", "g2", 5, ""), w("w-c", "g1", 7, "")},
			[]Peer{alive("g1", ""), gone("g2", "", mesh.StatusDead, time.Hour)},
			[]Move{to("w-a", 5, "g1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanFailover(tt.workers, tt.peers, t0, grace)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("moves (-want +got):\n%s", d)
			}
		})
	}
}

// TestPlanFailoverDeterministic shuffles the inputs: the plan stays the same.
func TestPlanFailoverDeterministic(t *testing.T) {
	var workers []Worker
	for i := range 200 {
		workers = append(workers, w(fmt.Sprintf("w-%04d", i), fmt.Sprintf("g%d", i%4), uint64(i+1), []string{"", "eu", "us"}[i%3]))
	}
	peers := []Peer{
		peer("g0", "eu", mesh.StatusDead, t0.Add(-time.Hour)), peer("g1", "eu", mesh.StatusAlive, t0),
		peer("g2", "us", mesh.StatusAlive, t0), peer("g3", "", mesh.StatusLeft, t0.Add(-time.Minute)),
		peer("g4", "us", mesh.StatusAlive, t0), peer("g5", "", mesh.StatusAlive, t0),
	}
	want := PlanFailover(workers, peers, t0, grace)
	if len(want) != 100 { // the workers of g0 and g3
		t.Fatalf("%d moves, want 100", len(want))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		ws, ps := append([]Worker(nil), workers...), append([]Peer(nil), peers...)
		rng.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
		rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		if d := cmp.Diff(want, PlanFailover(ws, ps, t0, grace)); d != "" {
			t.Fatalf("shuffle %d changed the plan:\n%s", i, d)
		}
	}
}

// TestPlanFailoverSpread: 300 workers of a dead owner spread roughly evenly over 3 live peers,
// and a fourth live peer takes only workers from the others (rendezvous hashing moves the
// fewest).
func TestPlanFailoverSpread(t *testing.T) {
	var workers []Worker
	for i := range 300 {
		s := worker.Spec{URL: fmt.Sprintf("http://127.0.0.1:%d", 20000+i)}
		if err := s.Normalize(); err != nil {
			t.Fatal(err)
		}
		workers = append(workers, Worker{ID: s.ID(), Owner: "dead", Epoch: 1})
	}
	peers := []Peer{peer("dead", "", mesh.StatusDead, t0.Add(-time.Hour)),
		peer("g1", "", mesh.StatusAlive, t0), peer("g2", "", mesh.StatusAlive, t0), peer("g3", "", mesh.StatusAlive, t0)}
	three := PlanFailover(workers, peers, t0, grace)
	counts := make(map[string]int)
	for _, m := range three {
		counts[m.To]++
	}
	if len(three) != 300 || len(counts) != 3 {
		t.Fatalf("%d moves to %v", len(three), counts)
	}
	for p, n := range counts {
		if n < 70 || n > 130 { // 100 expected; a binomial's 4 sigma is about 33
			t.Errorf("%s got %d of 300 workers: %v", p, n, counts)
		}
	}
	four := PlanFailover(workers, append(peers, peer("g4", "", mesh.StatusAlive, t0)), t0, grace)
	for i, m := range four {
		if m.To != "g4" && m.To != three[i].To {
			t.Errorf("%s went to %s with 3 peers and to %s with 4", m.ID, three[i].To, m.To)
		}
	}
}

func TestNextFailover(t *testing.T) {
	workers := []Worker{w("w-a", "g2", 1, ""), w("w-b", "g3", 1, ""), w("w-c", "g1", 1, ""),
		{ID: "w-ipc", Owner: "g4", Epoch: 1, HostLocal: true}}
	tests := []struct {
		name   string
		peers  []Peer
		want   time.Time
		wantOK bool
	}{
		{"nobody gone", []Peer{peer("g1", "", mesh.StatusAlive, t0), peer("g2", "", mesh.StatusAlive, t0)}, time.Time{}, false},
		{"the earliest deadline", []Peer{peer("g1", "", mesh.StatusAlive, t0),
			peer("g2", "", mesh.StatusDead, t0.Add(-3*time.Second)), peer("g3", "", mesh.StatusLeft, t0.Add(-5*time.Second))},
			t0.Add(5*time.Second + time.Nanosecond), true},
		{"past the grace is for the plan, not the timer", []Peer{peer("g1", "", mesh.StatusAlive, t0),
			peer("g2", "", mesh.StatusDead, t0.Add(-time.Hour))}, time.Time{}, false},
		{"suspect waits for the mesh", []Peer{peer("g2", "", mesh.StatusSuspect, t0)}, time.Time{}, false},
		{"host-local owners do not count", []Peer{peer("g4", "", mesh.StatusDead, t0)}, time.Time{}, false},
		{"unknown with since", []Peer{peer("g1", "", mesh.StatusAlive, t0), peer("g3", "", mesh.StatusUnknown, t0)}, t0.Add(grace + time.Nanosecond), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := NextFailover(workers, tt.peers, t0, grace)
			if ok != tt.wantOK || !got.Equal(tt.want) {
				t.Errorf("got %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
			if ok && len(PlanFailover(workers, tt.peers, got, grace)) == 0 {
				t.Errorf("nothing to move at the deadline %v", got)
			}
		})
	}
}

func TestGone(t *testing.T) {
	tests := []struct {
		s    mesh.Status
		want bool
	}{
		{mesh.StatusAlive, false}, {mesh.StatusSuspect, false}, {mesh.StatusDead, true}, {mesh.StatusLeft, true},
		{mesh.StatusForeign, false}, {mesh.StatusUnknown, true}, {0, false},
	}
	for _, tt := range tests {
		t.Run(tt.s.String(), func(t *testing.T) {
			if got := gone(tt.s); got != tt.want {
				t.Errorf("gone(%v) = %v, want %v", tt.s, got, tt.want)
			}
		})
	}
}
