package policy

import (
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/prefixindex"
	"github.com/meshgw/meshgw/worker"
)

// The rules cache_aware chooses by (CacheAwareConfig.Rule, --cache-rule).
const (
	// RuleCost picks the candidate of least cost: the routing text it lacks plus LoadCost per
	// request in flight, as Dynamo's KV router weighs uncached prefill against queued work.
	RuleCost = "cost"
	// RuleSMG is SMG's rule: a spill gate on load, then the best match over a threshold, then
	// the least indexed text.
	RuleSMG = "smg"
)

// CacheRules lists the rules, the default first.
func CacheRules() []string { return []string{RuleCost, RuleSMG} }

// Defaults of CacheAwareConfig: the rule and LoadCost are meshgw's, chosen by the routing
// benchmark (docs/performance.md); the thresholds are SMG's.
const (
	DefaultCacheRule           = RuleCost
	DefaultLoadCost            = 256
	DefaultLoadSlack           = 2
	DefaultCacheThreshold      = 0.3
	DefaultBalanceAbsThreshold = 64
	DefaultBalanceRelThreshold = 1.5
	DefaultMaxTreeSize         = prefixindex.DefaultMaxChars
	DefaultEvictionInterval    = prefixindex.DefaultEvictionInterval
)

// CacheAwareConfig tunes cache_aware. A zero field takes the default its comment names; where
// zero is a meaningful setting, a negative value asks for it.
type CacheAwareConfig struct {
	// Rule (--cache-rule) is RuleCost or RuleSMG. Default RuleCost.
	Rule string
	// LoadCost (--cache-load-cost), for RuleCost: how many bytes of uncached routing text one
	// request in flight at a worker weighs as much as. Default 256; negative: 0 (load only
	// breaks ties).
	LoadCost float64
	// LoadSlack (--cache-load-slack), for RuleCost: how many requests in flight above the least
	// loaded candidate's cost nothing, so that load differences as small as the noise of
	// requests starting and ending (and of the fleet-wide load's age) do not move a request
	// off the worker holding its text. Default 2; negative: 0.
	LoadSlack int64
	// CacheThreshold (--cache-threshold): a request goes to the worker whose known prefix
	// matches its routing text best when the match covers more than this share of the text.
	// Default 0.3; negative: 0.
	CacheThreshold float64
	// BalanceAbsThreshold (--balance-abs-threshold) and BalanceRelThreshold
	// (--balance-rel-threshold): the candidates are imbalanced, and a request goes to the least
	// loaded, when the most loaded exceeds the least loaded by more than BalanceAbsThreshold
	// requests and more than BalanceRelThreshold times its load. Defaults 64 and 1.5;
	// negative: 0.
	BalanceAbsThreshold int64
	BalanceRelThreshold float64
	// MaxTreeSize (--max-tree-size) bounds the index: bytes of routing text per model, all
	// workers together. Default 67,108,864.
	MaxTreeSize int64
	// EvictionInterval (--eviction-interval): how often least recently used blocks are evicted
	// down to MaxTreeSize. Default 120 s; negative: only when a model holds twice
	// MaxTreeSize.
	EvictionInterval time.Duration
}

func (c *CacheAwareConfig) setDefaults() {
	orZero := func(v *float64, def float64) {
		if *v == 0 {
			*v = def
		} else if *v < 0 {
			*v = 0
		}
	}
	if c.Rule == "" {
		c.Rule = DefaultCacheRule
	}
	orZero(&c.LoadCost, DefaultLoadCost)
	if c.LoadSlack == 0 {
		c.LoadSlack = DefaultLoadSlack
	} else if c.LoadSlack < 0 {
		c.LoadSlack = 0
	}
	orZero(&c.CacheThreshold, DefaultCacheThreshold)
	orZero(&c.BalanceRelThreshold, DefaultBalanceRelThreshold)
	if c.BalanceAbsThreshold == 0 {
		c.BalanceAbsThreshold = DefaultBalanceAbsThreshold
	} else if c.BalanceAbsThreshold < 0 {
		c.BalanceAbsThreshold = 0
	}
}

// Load reports how loaded a worker is, in requests. The policies that weigh load read it once
// per candidate and pick.
type Load interface {
	Load(w *pool.Worker) int64
}

// Routes hears what cache_aware's choices added to its index, for the worker's owner.
type Routes interface {
	// Routed says that w was chosen for a text of model (the index's key: nil for the index
	// that workers taking any model share) and that its entry took uses: the blocks new to it,
	// and those whose last use was more than RefreshAfter old. Both slices are the caller's
	// and reused after the call returns: copy what is kept. It is called on the request path:
	// it must be cheap and never block.
	Routed(w *pool.Worker, model []byte, uses []prefixindex.BlockUse)
}

// RefreshAfter is how old a block's last use in the index must be before a choice that uses it
// again tells Routes of it: so a copy's least-recently-used order stays within RefreshAfter of
// this index's, without hearing of every use.
const RefreshAfter = time.Second

// inflight is the load this gateway sees at once: its own requests in flight to the worker.
type inflight struct{}

func (inflight) Load(w *pool.Worker) int64 { return w.Inflight() }

// cacheAware routes a request to the worker most likely to hold its prompt's prefix in its KV
// cache, weighed against its load, with the index of prefixindex. By RuleCost (chooseCost) the
// least cost of uncached text and load. By RuleSMG, as SMG's cache_aware does over its
// approximate tree:
//
//  1. When the candidates are imbalanced (see CacheAwareConfig), the least loaded one.
//  2. Else, when the best match covers more than CacheThreshold of the routing text, the
//     best-matching candidate; ties go to the lower load, then to the earlier candidate.
//  3. Else the candidate whose entry holds the least text (the most room in its cache); ties
//     go to the lower load, then to the earlier candidate.
//
// Then the chosen worker's entry takes the request's text. Ties in step 1 go to the earlier
// candidate.
type cacheAware struct {
	cfg     CacheAwareConfig
	idx     *prefixindex.Index
	load    Load
	routes  Routes
	now     func() time.Time
	log     *slog.Logger
	scratch sync.Pool // *pickScratch
}

// pickScratch is what one Pick works in, reused so that Pick allocates nothing.
type pickScratch struct {
	blocks  prefixindex.Blocks
	ids     []prefixindex.Worker
	matches []prefixindex.Match
	loads   []int64
	uses    []prefixindex.BlockUse
}

func newCacheAware(o Options) *cacheAware {
	cfg := o.CacheAware
	cfg.setDefaults()
	p := &cacheAware{
		cfg:    cfg,
		idx:    o.Index,
		load:   o.Load,
		routes: o.Routes,
		now:    o.Now,
		log:    o.Logger,
	}
	if p.idx == nil {
		p.idx = prefixindex.New(prefixindex.Config{MaxChars: cfg.MaxTreeSize, EvictionInterval: cfg.EvictionInterval})
	}
	if p.load == nil {
		p.load = inflight{}
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.scratch.New = func() any { return &pickScratch{} }
	return p
}

func (*cacheAware) Name() string { return CacheAware }

func (p *cacheAware) Pick(c []*pool.Worker, r *Request) *pool.Worker {
	s := p.scratch.Get().(*pickScratch)
	defer p.scratch.Put(s)
	var prompt []byte
	if r != nil {
		prompt = r.Prompt
	}
	s.blocks.SetPrompt(prompt)
	s.ids, s.matches, s.loads = s.ids[:0], grow(s.matches, len(c)), s.loads[:0]
	for _, w := range c {
		s.ids = append(s.ids, prefixindex.Worker(w.Hash))
		s.loads = append(s.loads, p.load.Load(w))
	}
	key := indexKey(c, r)
	m := p.idx.Model(key)
	m.Lookup(&s.blocks, s.ids, s.matches)
	var i int
	if p.cfg.Rule == RuleSMG {
		i = choose(&p.cfg, s.blocks.Len, s.matches, s.loads)
	} else {
		i = chooseCost(p.cfg.LoadCost, p.cfg.LoadSlack, &s.blocks, s.ids, s.matches, s.loads)
	}
	if n := s.blocks.Len; n > 0 {
		c[i].ObservePrediction(uint64(n), uint64(min(s.matches[i].Len, n)))
	}
	now := p.now()
	if p.routes == nil {
		m.Insert(s.ids[i], &s.blocks, now)
	} else if s.uses = m.InsertReport(s.ids[i], &s.blocks, now, RefreshAfter, s.uses[:0]); len(s.uses) > 0 {
		p.routes.Routed(c[i], key, s.uses)
	}
	if p.idx.Due(now) {
		go p.evict(now)
	}
	return c[i]
}

// choose returns the index of the candidate to route to, by the rules of cacheAware, given the
// routing text's length and each candidate's match and load.
func choose(cfg *CacheAwareConfig, textLen int, matches []prefixindex.Match, loads []int64) int {
	least, most := 0, 0
	for i, l := range loads {
		if l < loads[least] {
			least = i
		}
		if l > loads[most] {
			most = i
		}
	}
	minL, maxL := loads[least], loads[most]
	if maxL-minL > cfg.BalanceAbsThreshold && float64(maxL) > float64(minL)*cfg.BalanceRelThreshold {
		return least
	}
	best := 0
	for i := range matches {
		if matches[i].Len > matches[best].Len || matches[i].Len == matches[best].Len && loads[i] < loads[best] {
			best = i
		}
	}
	if textLen > 0 && float64(matches[best].Len)/float64(textLen) > cfg.CacheThreshold {
		return best
	}
	smallest := 0
	for i := range matches {
		if matches[i].Held < matches[smallest].Held || matches[i].Held == matches[smallest].Held && loads[i] < loads[smallest] {
			smallest = i
		}
	}
	return smallest
}

// chooseCost returns the index of the candidate of least cost, a candidate's cost being the
// bytes of routing text it lacks (the text's length less its match) plus loadCost per request
// in flight beyond slack requests more than the least loaded candidate's. Ties go to the longer match, then the lower load, then the entry holding less text
// (the most room in its cache, as SMG sends a miss: new sessions spread over the caches), then
// the highest rendezvous score of the text's first block and the worker: so gateways that see
// the same new text at once, before any knows where another sent it, agree on one worker, and
// different texts spread over the idle ones.
func chooseCost(loadCost float64, slack int64, b *prefixindex.Blocks, ids []prefixindex.Worker, matches []prefixindex.Match, loads []int64) int {
	var key uint64
	if len(b.Hashes) > 0 {
		key = b.Hashes[0]
	}
	free := loads[0] // the least load, plus the slack
	for _, l := range loads[1:] {
		free = min(free, l)
	}
	free += slack
	best, bestCost := 0, float64(b.Len-matches[0].Len)+loadCost*float64(max(0, loads[0]-free))
	for i := 1; i < len(matches); i++ {
		cost := float64(b.Len-matches[i].Len) + loadCost*float64(max(0, loads[i]-free))
		switch {
		case cost < bestCost:
		case cost > bestCost:
			continue
		case matches[i].Len > matches[best].Len:
		case matches[i].Len < matches[best].Len:
			continue
		case loads[i] < loads[best]:
		case loads[i] > loads[best]:
			continue
		case matches[i].Held < matches[best].Held:
		case matches[i].Held > matches[best].Held:
			continue
		case worker.Mix(key^uint64(ids[i])) <= worker.Mix(key^uint64(ids[best])):
			continue
		}
		best, bestCost = i, cost
	}
	return best
}

// indexKey names the model whose index a request uses: its model when a candidate declares the
// models it serves, else "" (workers that take any model share one index). So the number of
// indexes is bounded by the models workers declare, whatever names clients send.
func indexKey(c []*pool.Worker, r *Request) []byte {
	if r == nil || len(r.Model) == 0 {
		return nil
	}
	for _, w := range c {
		if len(w.Models) > 0 {
			return r.Model
		}
	}
	return nil
}

// evict runs an eviction Due claimed, off the request's path.
func (p *cacheAware) evict(now time.Time) {
	defer func() {
		if v := recover(); v != nil {
			p.log.Error("prefix index eviction panicked", "panic", v, "stack", string(debug.Stack()))
		}
	}()
	p.idx.Evict(now)
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
