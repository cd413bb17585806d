package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/gateway/policy"
)

// cacheAwareFlags are SMG's flags of the cache_aware policy, with SMG's defaults and aliases.
type cacheAwareFlags struct {
	rule         string
	loadCost     float64
	loadSlack    int
	threshold    float64
	absThreshold int
	relThreshold float64
	maxTreeSize  int64
	evictionSecs int
	scope        string

	thresholdNames, evictionNames *aliasSet
}

func (f *cacheAwareFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.rule, "cache-rule", policy.DefaultCacheRule, "cache_aware: how it chooses: cost (the worker with the least routing text it has not been sent plus --cache-load-cost per request in flight) or smg (SMG's rules: --balance-abs-threshold and --balance-rel-threshold, then --cache-threshold, then the least indexed text)")
	fs.Float64Var(&f.loadCost, "cache-load-cost", policy.DefaultLoadCost, "cache_aware with --cache-rule cost: bytes of uncached routing text that one request in flight at a worker weighs as much as (0: load only breaks ties)")
	fs.IntVar(&f.loadSlack, "cache-load-slack", policy.DefaultLoadSlack, "cache_aware with --cache-rule cost: requests in flight above the least loaded worker's that cost nothing, so that small load differences do not move a request off the worker holding its text")
	f.thresholdNames = aliases(fs, float64Value(&f.threshold, policy.DefaultCacheThreshold),
		[2]string{"cache-threshold", "cache_aware: a request goes to the worker whose known prefix matches its routing text longest when the match covers more than this share of the text (0-1); else to the worker with the least indexed text"},
		[2]string{"cache-match-threshold", "alias of --cache-threshold"})
	fs.IntVar(&f.absThreshold, "balance-abs-threshold", policy.DefaultBalanceAbsThreshold, "cache_aware: the workers are imbalanced, and a request goes to the least loaded, when the most loaded has more than this many requests in flight beyond the least loaded and more than --balance-rel-threshold times as many")
	fs.Float64Var(&f.relThreshold, "balance-rel-threshold", policy.DefaultBalanceRelThreshold, "cache_aware: see --balance-abs-threshold")
	fs.Int64Var(&f.maxTreeSize, "max-tree-size", policy.DefaultMaxTreeSize, "cache_aware: bytes of routing text the prefix index holds per model, all workers together; each eviction brings it back under this, least recently used first")
	f.evictionNames = aliases(fs, intValue(&f.evictionSecs, int(policy.DefaultEvictionInterval/time.Second)),
		[2]string{"eviction-interval", "cache_aware: seconds between two evictions of the prefix index (0: only when a model holds twice --max-tree-size)"},
		[2]string{"eviction-interval-secs", "alias of --eviction-interval"})
	fs.StringVar(&f.scope, "cache-scope", cacheScopeFleet, "cache_aware: fleet (each worker's owner keeps its prefix index and adds up its requests in flight through every gateway, and every gateway holds a copy) or local (each gateway knows only its own choices and requests, as SMG)")
}

// The values of --cache-scope.
const (
	cacheScopeFleet = "fleet"
	cacheScopeLocal = "local"
)

func (f *cacheAwareFlags) validate() error {
	for _, e := range []error{
		f.thresholdNames.check(),
		f.evictionNames.check(),
		checkMin("balance-abs-threshold", f.absThreshold, 0),
		checkMin("cache-load-slack", f.loadSlack, 0),
		checkSecs("eviction-interval", f.evictionSecs, 0),
		checkOneOf("cache-scope", f.scope, []string{cacheScopeFleet, cacheScopeLocal}),
		checkOneOf("cache-rule", f.rule, policy.CacheRules()),
	} {
		if e != nil {
			return e
		}
	}
	if !(f.threshold >= 0 && f.threshold <= 1) {
		return usagef("--cache-threshold %v is not in 0-1", f.threshold)
	}
	if !(f.relThreshold >= 0) {
		return usagef("--balance-rel-threshold %v is below the minimum 0", f.relThreshold)
	}
	if !(f.loadCost >= 0) {
		return usagef("--cache-load-cost %v is below the minimum 0", f.loadCost)
	}
	if f.maxTreeSize < 1 {
		return usagef("--max-tree-size %d is below the minimum 1", f.maxTreeSize)
	}
	return nil
}

// config maps the flags to the policy's config, where a zero field means the default: a flag
// of 0 becomes a negative value, which means 0 (for the interval: no periodic eviction).
func (f *cacheAwareFlags) config() policy.CacheAwareConfig {
	c := policy.CacheAwareConfig{
		Rule:                f.rule,
		LoadCost:            f.loadCost,
		LoadSlack:           int64(f.loadSlack),
		CacheThreshold:      f.threshold,
		BalanceAbsThreshold: int64(f.absThreshold),
		BalanceRelThreshold: f.relThreshold,
		MaxTreeSize:         f.maxTreeSize,
		EvictionInterval:    time.Duration(f.evictionSecs) * time.Second,
	}
	if c.LoadCost == 0 {
		c.LoadCost = -1
	}
	if c.LoadSlack == 0 {
		c.LoadSlack = -1
	}
	if c.CacheThreshold == 0 {
		c.CacheThreshold = -1
	}
	if c.BalanceAbsThreshold == 0 {
		c.BalanceAbsThreshold = -1
	}
	if c.BalanceRelThreshold == 0 {
		c.BalanceRelThreshold = -1
	}
	if c.EvictionInterval == 0 {
		c.EvictionInterval = -1
	}
	return c
}
