package nemesis

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/meshgw/meshgw/test/chaos/cluster"
	"github.com/meshgw/meshgw/test/chaos/history"
)

// fakeRegions names regions eu, us and ap; Cut and Heal only count.
type fakeRegions struct{ cuts, heals []int }

func (f *fakeRegions) Cut(r int)  { f.cuts = append(f.cuts, r) }
func (f *fakeRegions) Heal(r int) { f.heals = append(f.heals, r) }
func (f *fakeRegions) Region(name string) int {
	return slices.Index([]string{"eu", "us", "ap"}, name)
}

// wanCluster is 5 gateways and 3 engines laid out over eu, us and ap as a WAN run lays them.
func wanCluster() *cluster.Cluster {
	regions := cluster.RegionNames(3)
	gws, engs, _ := cluster.Layout(5, 3, 3)
	c := &cluster.Cluster{}
	for i, p := range gws {
		c.Nodes = append(c.Nodes, &cluster.Node{ID: "n" + string(rune('1'+i)), Region: regions[p.Region]})
	}
	for j, p := range engs {
		c.Engines = append(c.Engines, &cluster.Engine{Name: "e" + string(rune('1'+j)), Host: "10.78.0." + string(rune('1'+j)), Port: 8000, Region: regions[p.Region]})
	}
	return c
}

// Over a WAN, the partitions the bed cannot express and the forced leader change are skipped,
// each with its reason; partition-one and the process and engine faults run.
func TestPlanOverRegions(t *testing.T) {
	n := &Nemesis{C: wanCluster(), Regions: &fakeRegions{}, WeightEngine: "http://10.78.3.2:8000"}
	kinds := []string{Kill, Pause, Wipe, PartitionOne, PartitionMinority, PartitionMajority, PartitionOneWay,
		EngineFlap, EngineHang, WeightFail, LeaderTransfer}
	run := n.Plan(kinds)
	want := []string{Kill, Pause, Wipe, PartitionOne, EngineFlap, EngineHang, WeightFail}
	if !slices.Equal(run, want) {
		t.Errorf("runs %v; want %v", run, want)
	}
	skipped := n.Skipped()
	for _, k := range []string{PartitionMinority, PartitionMajority, PartitionOneWay, LeaderTransfer} {
		if !strings.Contains(skipped[k], "simulated WAN") {
			t.Errorf("%s skipped for %q; want the WAN's reason", k, skipped[k])
		}
	}
	// Without regions (and not isolated) partition-one is skipped for want of isolation.
	plain := &Nemesis{C: wanCluster()}
	plain.Plan([]string{PartitionOne})
	if why := plain.Skipped()[PartitionOne]; !strings.Contains(why, "not isolated") {
		t.Errorf("partition-one without regions or isolation skipped for %q", why)
	}
}

// partition-one over a WAN claims the target's whole region against the rest: n1 and n4 are
// eu's (round-robin over 3 regions), whichever of them is drawn.
func TestRegionCutClaim(t *testing.T) {
	n := &Nemesis{C: wanCluster(), Regions: &fakeRegions{}}
	open := offer{fits: func(*claim) bool { return true }, calm: func(string) bool { return true }}
	for _, target := range []string{"n1", "n4", "n2"} {
		tg, c := n.claimFor(plan{kind: PartitionOne, others: []int{0, 1, 2, 3}}, n.C.Node(target), 0, open)
		if c == nil {
			t.Fatalf("no claim for a cut of %s's region", target)
		}
		region := n.C.Node(target).Region
		a, b := ids(tg.a), ids(tg.b)
		for _, id := range a {
			if n.C.Node(id).Region != region {
				t.Errorf("cut of %s's region %s takes %s of %s", target, region, id, n.C.Node(id).Region)
			}
		}
		if len(a)+len(b) != 5 || !slices.Contains(a, target) || !slices.Equal(c.net, a) || len(c.links) != len(a)*len(b) {
			t.Errorf("cut of %s: sides %v | %v, claim net %v with %d links", target, a, b, c.net, len(c.links))
		}
	}
	if _, c := n.claimFor(plan{kind: PartitionOne, others: []int{0, 1, 2, 3}}, n.C.Node("n1"), 0, open); !slices.Equal(c.net, []string{"n1", "n4"}) {
		t.Errorf("eu's cut holds %v; want [n1 n4]", c.net)
	}
}

// A region cut cuts the region, records its interval with the region's gateways and engines'
// workers, tells OnCut at the cut and at the heal, and heals it.
func TestRegionCutRecorded(t *testing.T) {
	rs := &fakeRegions{}
	rec := history.NewRecorder()
	var events []string
	n := &Nemesis{C: wanCluster(), Regions: rs, Rec: rec, Rng: rand.New(rand.NewPCG(1, 2)), Log: func(string, ...any) {},
		OnCut: func(region string, gws []*cluster.Node) func() {
			events = append(events, "cut "+region+" "+strings.Join(ids(gws), ","))
			return func() { events = append(events, "healed "+region) }
		}}
	// The wait for the gateways to come back ends at once: these have no process.
	stopped, cancel := context.WithCancel(t.Context())
	cancel()
	n.Stop = stopped
	n.Plan([]string{PartitionOne})
	n.room = newRoom([]string{"n1", "n2", "n3", "n4", "n5"}, func() (string, []string) { return "", nil })
	c := &claim{kind: PartitionOne}
	tg := target{node: n.C.Nodes[1]}
	tg.a, tg.b = sameRegion(n.C.Nodes, "us")
	n.room.claims[c] = true
	n.regionCut(t.Context(), c, plan{kind: PartitionOne, hold: 1}, tg)
	if !slices.Equal(rs.cuts, []int{1}) || !slices.Equal(rs.heals, []int{1}) {
		t.Errorf("cuts %v, heals %v; want region 1 (us) cut and healed", rs.cuts, rs.heals)
	}
	if want := []string{"cut us n2,n5", "healed us"}; !slices.Equal(events, want) {
		t.Errorf("OnCut saw %v; want %v", events, want)
	}
	h := rec.Snapshot()
	if len(h.Cuts) != 1 || h.Cuts[0].Region != "us" || !slices.Equal(h.Cuts[0].Gateways, []string{"n2", "n5"}) ||
		len(h.Cuts[0].Workers) != 1 || h.Cuts[0].To == history.Never {
		t.Errorf("recorded cuts %+v", h.Cuts)
	}
	if n.Counts()[PartitionOne] != 1 {
		t.Errorf("counts %v", n.Counts())
	}
}
