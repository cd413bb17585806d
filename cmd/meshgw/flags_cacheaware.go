package main

import (
	"fmt"
	"strings"
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
	fs                            *pflag.FlagSet // to tell a value given from a default
}

// ruleFlags are the flags each --cache-rule alone reads (an alias stands for its set): under
// the other rule they do nothing.
var ruleFlags = map[string][]string{
	policy.RuleCost: {"cache-load-cost", "cache-load-slack"},
	policy.RuleSMG:  {"cache-threshold", "balance-abs-threshold", "balance-rel-threshold"},
}

func (f *cacheAwareFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.rule, "cache-rule", policy.DefaultCacheRule, "cache_aware: how it chooses: cost (the worker with the least routing text it has not been sent plus --cache-load-cost per request in flight) or smg (SMG's rules: --balance-abs-threshold and --balance-rel-threshold, then --cache-threshold, then the least indexed text)")
	fs.Float64Var(&f.loadCost, "cache-load-cost", policy.DefaultLoadCost, "cache_aware with --cache-rule cost: bytes of uncached routing text that one request in flight at a worker weighs as much as (0: load only breaks ties)")
	fs.IntVar(&f.loadSlack, "cache-load-slack", policy.DefaultLoadSlack, "cache_aware with --cache-rule cost: requests in flight above the least loaded worker's that cost nothing, so that small load differences do not move a request off the worker holding its text")
	f.thresholdNames = aliases(fs, float64Value(&f.threshold, policy.DefaultCacheThreshold),
		[2]string{"cache-threshold", "cache_aware with --cache-rule smg: a request goes to the worker whose known prefix matches its routing text longest when the match covers more than this share of the text (0-1); else to the worker with the least indexed text"},
		[2]string{"cache-match-threshold", "alias of --cache-threshold (cache_aware with --cache-rule smg)"})
	fs.IntVar(&f.absThreshold, "balance-abs-threshold", policy.DefaultBalanceAbsThreshold, "cache_aware with --cache-rule smg: the workers are imbalanced, and a request goes to the least loaded, when the most loaded has more than this many requests in flight beyond the least loaded and more than --balance-rel-threshold times as many")
	fs.Float64Var(&f.relThreshold, "balance-rel-threshold", policy.DefaultBalanceRelThreshold, "cache_aware with --cache-rule smg: see --balance-abs-threshold")
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
		return valuef("cache-threshold", "%v is not in 0-1", f.threshold)
	}
	if !(f.relThreshold >= 0) {
		return valuef("balance-rel-threshold", "%v is below the minimum 0", f.relThreshold)
	}
	if !(f.loadCost >= 0) {
		return valuef("cache-load-cost", "%v is below the minimum 0", f.loadCost)
	}
	if f.maxTreeSize < 1 {
		return valuef("max-tree-size", "%d is below the minimum 1", f.maxTreeSize)
	}
	return nil
}

// ignored says which flags given (as given: the flag or its variable, under the name given)
// only the cache rule not in force reads, with policy (--policy) cache_aware; "" when none.
// An SMG user who brings over --cache-threshold is told that the default rule, cost, ignores
// it.
func (f *cacheAwareFlags) ignored(policyName string) string {
	if policyName != policy.CacheAware {
		return ""
	}
	var names []string
	other := ""
	for _, rule := range policy.CacheRules() { // two rules: the one in force and the other
		if rule == f.rule {
			continue
		}
		for _, name := range ruleFlags[rule] {
			if g := given(f.fs, name); len(g) > 0 {
				names, other = append(names, g...), rule
			}
		}
	}
	switch len(names) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("%s takes effect only with --cache-rule %s; --cache-rule is %s, which ignores it", names[0], other, f.rule)
	}
	return fmt.Sprintf("%s take effect only with --cache-rule %s; --cache-rule is %s, which ignores them", strings.Join(names, ", "), other, f.rule)
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
