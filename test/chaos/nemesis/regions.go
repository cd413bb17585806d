package nemesis

import (
	"context"
	"time"

	"github.com/meshgw/meshgw/test/chaos/cluster"
	"github.com/meshgw/meshgw/test/chaos/workload"
)

// regionCut is partition-one over a simulated WAN: the target's whole region, its gateways and
// engines, cut off from the others both ways for the hold (CutHold when set), then healed. It
// records the cut (its gateways as cut off, serving, and the region's interval with its
// workers, for the losses' region_cut cause), tells OnCut, and waits until every gateway of
// the region is back.
func (n *Nemesis) regionCut(ctx context.Context, c *claim, p plan, t target) {
	region := t.node.Region
	r := n.Regions.Region(region)
	hold := p.hold
	if n.CutHold > 0 {
		hold = n.CutHold
	}
	var workers []string
	for _, e := range n.C.Engines {
		if e.Region == region {
			workers = append(workers, workload.NewWorker(e.URL()).ID)
		}
	}
	n.say("%s on %s for %v: region %s cut off, %v | %v", p.kind, t.node.ID, hold.Round(time.Millisecond), region, ids(t.a), ids(t.b))
	n.count(p.kind)
	if r < 0 {
		n.fail("%s: %s is in no region of the WAN (%q)", p.kind, t.node.ID, region)
		return
	}
	for _, o := range t.a {
		n.Rec.DownFrom(o.ID, p.kind, true)
	}
	n.Rec.CutFrom(region, ids(t.a), workers)
	n.Regions.Cut(r)
	var healed func()
	if n.OnCut != nil {
		healed = n.OnCut(region, t.a)
	}
	wait(ctx, hold)
	n.Regions.Heal(r)
	n.Rec.CutUntil(region)
	if healed != nil {
		healed()
	}
	n.room.healed(c)
	for _, o := range t.a {
		n.Rec.DownUntil(o.ID, p.kind)
	}
	for _, o := range t.a {
		n.waitBack(c, p.kind, o)
	}
}

// sameRegion splits nodes into those of region and the others.
func sameRegion(nodes []*cluster.Node, region string) (in, out []*cluster.Node) {
	for _, o := range nodes {
		if o.Region == region {
			in = append(in, o)
		} else {
			out = append(out, o)
		}
	}
	return in, out
}
