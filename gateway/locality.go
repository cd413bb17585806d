package gateway

import (
	"slices"
	"sync"
	"sync/atomic"
	"unique"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/gateway/locality"
	"github.com/meshgw/meshgw/gateway/pool"
)

// localityRouting is how a gateway with locality routing on chooses a request's region
// (gateway/locality). A gateway without it has none, and selection skips it entirely.
type localityRouting struct {
	region, none unique.Handle[string] // this gateway's region, and no region
	factor       float64
	draw         func() float64
}

func newLocalityRouting(cfg *Config) *localityRouting {
	if !cfg.Locality.On(cfg.Region) {
		return nil
	}
	draw := cfg.localityDraw
	if draw == nil {
		draw = randFloat
	}
	return &localityRouting{region: unique.Make(cfg.Region), none: unique.Make(""), factor: cfg.Locality.FactorOrDefault(), draw: draw}
}

// outOfService are the gates by which an operator took a worker out of service: disabled,
// draining, being removed. Such a worker is not counted in its region at all (it is not
// capacity the region is meant to have), where one closed by its health, its circuit breaker, a
// quarantine (is_dead) or a hung hold counts as a worker of the region that is not routable.
const outOfService = pool.GateDisabled | pool.GateDraining | pool.GateRemoving

// localCandidates sets c.cands to the routable workers that serve the request, in the region
// locality routing chooses for it; the policy then picks among them. It reads every worker once
// (the region's share depends on its workers that are not routable too), allocates nothing once
// the call's tally has seen the fleet's regions, and leaves avoid out as Snapshot.Candidates
// does: when avoid is all the chosen region has, the region counts it as not routable and the
// choice is made again with the same draw, so that a retry goes to another region rather than
// back to the worker that just failed; avoid alone is the answer only when nothing else is
// routable anywhere.
func (c *call) localCandidates(snap *pool.Snapshot, avoid *pool.Worker, l *localityRouting) {
	t := &c.tally
	t.Reset(l.region, l.none)
	c.cands, c.candRegions = c.cands[:0], c.candRegions[:0]
	need, model := c.meta.Caps, c.meta.Model
	avoided := false
	for _, w := range snap.All {
		if !w.Caps.Has(need) || !w.ServesModel(model) {
			continue
		}
		gates := w.Gates()
		if gates&outOfService != 0 {
			continue
		}
		routable := gates == 0 && w.Allow()
		region := t.Add(w.RegionKey, routable)
		switch {
		case !routable:
		case w == avoid:
			avoided = true
		default:
			c.cands, c.candRegions = append(c.cands, w), append(c.candRegions, region)
		}
	}
	draw := l.draw()
	choice := t.Choose(l.factor, draw)
	if avoided && choice.Has(avoid.RegionKey) && t.Of(choice.Region).Routable == 1 {
		t.Unroute(avoid.RegionKey)
		choice = t.Choose(l.factor, draw)
	}
	c.cands = locality.Filter(c.cands, c.candRegions, choice)
	if len(c.cands) == 0 && avoided {
		c.cands = append(c.cands, avoid)
	}
}

// localityCounter counts model requests by the gateway's region and the region of the worker
// that took them (meshgw_locality_requests_total), for a gateway that has a region, with
// locality routing on or off. Each worker region's child is resolved once, into a list copied
// on write, so the request path reads it without a lock or an allocation. Regions are few; past
// maxWorkerRegions of them, the rest count as "other".
type localityCounter struct {
	vec      *prometheus.CounterVec
	region   string
	children atomic.Pointer[[]regionChild]
	mu       sync.Mutex // serializes the additions to children
}

type regionChild struct {
	region string
	c      prometheus.Counter
}

const maxWorkerRegions = 64

func newLocalityCounter(reg prometheus.Registerer, region string) *localityCounter {
	m := &localityCounter{region: region, vec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshgw_locality_requests_total",
		Help: "Model requests sent to a worker, by this gateway's region and the region of the last worker tried (empty: the worker has none); counted by gateways that have a --region.",
	}, []string{"gateway_region", "worker_region"})}
	if reg != nil {
		reg.MustRegister(m.vec)
	}
	return m
}

// inc counts one request that went to a worker of region.
func (m *localityCounter) inc(region string) {
	if p := m.children.Load(); p != nil {
		for _, ch := range *p {
			if ch.region == region {
				ch.c.Inc()
				return
			}
		}
	}
	m.add(region).Inc()
}

// add resolves region's child the first time it is seen.
func (m *localityCounter) add(region string) prometheus.Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cur []regionChild
	if p := m.children.Load(); p != nil {
		cur = *p
	}
	for _, ch := range cur {
		if ch.region == region {
			return ch.c
		}
	}
	if len(cur) >= maxWorkerRegions {
		return m.vec.WithLabelValues(m.region, "other")
	}
	next := append(slices.Clip(cur), regionChild{region, m.vec.WithLabelValues(m.region, region)})
	m.children.Store(&next)
	return next[len(next)-1].c
}
