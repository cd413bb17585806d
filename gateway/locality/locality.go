// Package locality chooses the region a request is routed in: the gateway's own while enough of
// its workers are routable, other regions in proportion below that, as Envoy's priority levels
// spill with an overprovisioning factor.
//
// # The rule
//
// The gateway's own region is priority level 0 and every other region together is level 1
// (meshgw has no order among remote regions). For a request, the workers counted are those that
// serve its model and capabilities (the caller filters them); a worker without a region belongs to
// the gateway's own region, whatever that is, so it is local everywhere. With f the
// overprovisioning factor (--locality-overprovisioning-factor, 1.4), and for each level its
// workers counted (total) and those of them routable:
//
//	health(level)    = min(1, f × routable / total)        (0 when total is 0)
//	normalized       = min(1, health(local) + health(remote))
//	local share      = min(1, health(local) / normalized)  (1 when normalized is 0)
//	remote share     = 1 − local share
//
// This is Envoy's priority load with two levels (Envoy's docs, "Priority levels",
// intro/arch_overview/upstream/load_balancing/priority: health(P_X) = min(100, 1.4 × 100 ×
// healthy/total); normalized_total_health = min(100, Σ health); priority_load(P_0) = min(100,
// health(P_0) × 100 / normalized_total_health); priority_load(P_X) = min(100 − Σ earlier loads,
// health(P_X) × 100 / normalized_total_health)), in real numbers where Envoy rounds to whole
// percents. So the local region keeps every request while at least 1/f of its workers are
// routable (5 of 7 at 1.4), hands on 1 − f × routable/total of them below that (30 % with one of
// two routable), and all of them when it has none; the remote level's own health matters only
// when the two together are under 1 (normalization), and a local region whose remote regions have
// nothing routable keeps everything it can serve.
//
// # Several remote regions
//
// Envoy balances the hosts of one priority level together, so a level's share goes to its
// healthy hosts evenly. meshgw does the same with its remote level: the remote share is spread
// over the remote regions in proportion to their routable workers (one region with 4 routable and
// another with 1 take 4/5 and 1/5 of it). A user sees what one flat pool of the remote workers
// would give, with no region preferred over another.
//
// # Use
//
// Per request: Reset the Tally with the gateway's region, Add each counted worker (keeping the
// index Add returns for each candidate), Choose with a draw in [0, 1), then keep the candidates
// of the chosen region (Filter, or Choice.Has). None of it allocates once the Tally has seen
// the fleet's regions. The policy then runs on that subset. Regions are named by any comparable
// type: the gateway uses interned names (unique.Handle[string]), so that telling two regions
// apart costs one comparison of pointers, tests use plain strings.
package locality

import (
	"fmt"
	"math"
	"strings"
)

// The values of --locality-routing.
const (
	// Auto routes by locality when the gateway has a region.
	Auto = "auto"
	// Off routes over every region's workers alike.
	Off = "off"
)

// Modes lists the values of --locality-routing, the default first.
func Modes() []string { return []string{Auto, Off} }

// DefaultFactor is the overprovisioning factor, Envoy's default.
const DefaultFactor = 1.4

// Config is how a gateway routes by locality.
type Config struct {
	// Mode is Auto or Off. Default Auto.
	Mode string
	// Factor is the overprovisioning factor, at least 1. Default DefaultFactor.
	Factor float64
}

// Validate reports a Mode or Factor out of range.
func (c Config) Validate() error {
	if c.Mode != "" && c.Mode != Auto && c.Mode != Off {
		return fmt.Errorf("locality routing %q is not one of %s", c.Mode, strings.Join(Modes(), ", "))
	}
	if c.Factor != 0 && !(c.Factor >= 1 && !math.IsInf(c.Factor, 1)) {
		return fmt.Errorf("locality overprovisioning factor %v is not a finite number of at least 1", c.Factor)
	}
	return nil
}

// On reports whether a gateway of region routes by locality: Mode is not Off and region is set.
func (c Config) On(region string) bool { return c.Mode != Off && region != "" }

// FactorOrDefault is Factor, or DefaultFactor when it is zero.
func (c Config) FactorOrDefault() float64 {
	if c.Factor == 0 {
		return DefaultFactor
	}
	return c.Factor
}

// Count is one region's workers for a request: those counted, and of them the routable ones.
type Count struct {
	Total, Routable int
}

type regionCount[R comparable] struct {
	name R
	Count
}

// Tally counts one request's workers by region. R names a region: its name (string), or
// anything comparable that stands for it one to one, such as an interned handle
// (unique.Handle[string]), which makes each comparison one word's. The zero value is ready for
// Reset.
type Tally[R comparable] struct {
	local, none R
	Local       Count            // the gateway's region, region-less workers included
	remote      []regionCount[R] // the other regions, in the order they were first added
}

// Reset starts a tally for a gateway of region local, none being what stands for no region
// ("" for names), keeping the room it has.
func (t *Tally[R]) Reset(local, none R) {
	t.local, t.none, t.Local = local, none, Count{}
	t.remote = t.remote[:0]
}

// Add counts a worker of region (none: local) and returns the region's index: 0 for the local
// region, 1 and up for the others in the order they were first added. A Choice names its
// region by the same index, so the caller can keep each worker's index and filter by it without
// comparing regions again (Filter).
func (t *Tally[R]) Add(region R, routable bool) int {
	i := t.index(region)
	c := &t.Local
	if i > 0 {
		c = &t.remote[i-1].Count
	}
	c.Total++
	if routable {
		c.Routable++
	}
	return i
}

// Unroute counts one routable worker of region as not routable after all (a retry's failed
// worker, when it is the last one of the region chosen).
func (t *Tally[R]) Unroute(region R) {
	c := &t.Local
	if i := t.index(region); i > 0 {
		c = &t.remote[i-1].Count
	}
	if c.Routable > 0 {
		c.Routable--
	}
}

// index returns region's index (see Add), adding a remote region seen for the first time.
func (t *Tally[R]) index(region R) int {
	if region == t.local || region == t.none {
		return 0
	}
	for i := range t.remote {
		if t.remote[i].name == region {
			return i + 1
		}
	}
	t.remote = append(t.remote, regionCount[R]{name: region})
	return len(t.remote)
}

// Remote sums the counts of every other region.
func (t *Tally[R]) Remote() Count {
	var s Count
	for _, r := range t.remote {
		s.Total += r.Total
		s.Routable += r.Routable
	}
	return s
}

// Of returns the count of region (none: the local one).
func (t *Tally[R]) Of(region R) Count {
	if region == t.local || region == t.none {
		return t.Local
	}
	for _, r := range t.remote {
		if r.name == region {
			return r.Count
		}
	}
	return Count{}
}

// epsilon absorbs the rounding of f × routable / total, so that a region at exactly 1/f of its
// workers routable (5 of 7 at 1.4) counts as fully healthy.
const epsilon = 1e-9

// health is a level's health score (Envoy's), in 0-1.
func health(c Count, factor float64) float64 {
	if c.Total == 0 || c.Routable == 0 {
		return 0
	}
	h := factor * float64(c.Routable) / float64(c.Total)
	if h >= 1-epsilon {
		return 1
	}
	return h
}

// LocalShare is the share of requests the local region keeps, in 0-1 (see the package doc).
func (t *Tally[R]) LocalShare(factor float64) float64 {
	hl, hr := health(t.Local, factor), health(t.Remote(), factor)
	n := min(1, hl+hr)
	if n == 0 {
		return 1 // nothing routable anywhere: nowhere to spill to
	}
	return min(1, hl/n)
}

// Share is the share of requests region gets, in 0-1 (none: the local one).
func (t *Tally[R]) Share(region R, factor float64) float64 {
	l := t.LocalShare(factor)
	if region == t.local || region == t.none {
		return l
	}
	r := t.Remote().Routable
	if r == 0 {
		return 0
	}
	return (1 - l) * float64(t.Of(region).Routable) / float64(r)
}

// Choice is the region a request goes to.
type Choice[R comparable] struct {
	// Region is the region chosen.
	Region R
	// Local says it is the gateway's own region, to which region-less workers belong too.
	Local bool
	// Index is the region's index, as Add returned it (0: local).
	Index int
	none  R
}

// Has reports whether a worker of region is in the chosen region.
func (c Choice[R]) Has(region R) bool {
	return region == c.Region || c.Local && region == c.none
}

// Choose picks the region for a request by draw, a number in [0, 1): the local region when draw
// is below its share, else the remote region whose stretch of the rest draw falls in, each
// stretch as long as its region's share. When nothing is routable anywhere it chooses the local
// region (which then has no routable worker either).
func (t *Tally[R]) Choose(factor, draw float64) Choice[R] {
	local := Choice[R]{Region: t.local, Local: true, none: t.none}
	l := t.LocalShare(factor)
	r := t.Remote().Routable
	if draw < l || r == 0 {
		return local
	}
	// Map the rest of the draw, [l, 1), onto the remote regions' routable workers.
	u := (draw - l) / (1 - l) * float64(r)
	last := -1
	for i, rc := range t.remote {
		if rc.Routable == 0 {
			continue
		}
		if u < float64(rc.Routable) {
			return Choice[R]{Region: rc.name, Index: i + 1, none: t.none}
		}
		u -= float64(rc.Routable)
		last = i
	}
	return Choice[R]{Region: t.remote[last].name, Index: last + 1, none: t.none} // rounding put u at the very end
}

// Filter keeps, in order and in place, the workers of ws in the chosen region: ws[i] when
// index[i], its region's index as Add returned it, is c's.
func Filter[W any, R comparable](ws []W, index []int, c Choice[R]) []W {
	out := ws[:0]
	for i, w := range ws {
		if index[i] == c.Index {
			out = append(out, w)
		}
	}
	clear(ws[len(out):])
	return out
}
