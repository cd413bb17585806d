// Package policy picks one worker among the routable candidates of a request, with the
// load-balancing policies of SMG; every Pick is allocation-free once warm.
package policy

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/prefixindex"
	"github.com/meshgw/meshgw/worker"
)

// Names of the policies, as --policy takes them.
const (
	RoundRobin        = "round_robin"
	Random            = "random"
	LeastRequest      = "least_request"
	PowerOfTwo        = "power_of_two"
	ConsistentHashing = "consistent_hashing"
	PrefixHash        = "prefix_hash"
	CacheAware        = "cache_aware"
)

// Names lists every policy, the default first.
func Names() []string {
	return []string{CacheAware, RoundRobin, Random, LeastRequest, PowerOfTwo, ConsistentHashing, PrefixHash}
}

// Request is what a policy may look at besides the candidates.
type Request struct {
	// RoutingKey is the X-Mesh-Routing-Key (or X-SMG-Routing-Key) header, nil when absent.
	RoutingKey []byte
	// Prompt is the raw JSON of the prompt-bearing field of the body (messages, prompt, text or
	// input), nil when there is none.
	Prompt []byte
	// Model is the request's model, empty when it named none.
	Model []byte
}

// Policy picks a worker among candidates (never empty). Implementations are safe for
// concurrent use and do not allocate (cache_aware's index grows with new text).
type Policy interface {
	Name() string
	Pick(candidates []*pool.Worker, r *Request) *pool.Worker
}

// Options tune the policies that take parameters.
type Options struct {
	// PrefixUnits is prefix_hash's --prefix-token-count: how many units of the prompt are
	// hashed, a unit being 4 bytes of the prompt's raw JSON (about one token). Default 256.
	PrefixUnits int
	// Seed, when non-zero, makes random and power_of_two deterministic (tests). Zero uses the
	// runtime's per-thread generator, which needs no lock.
	Seed uint64
	// CacheAware tunes cache_aware.
	CacheAware CacheAwareConfig
	// Load is the load cache_aware weighs. Default: this gateway's requests in flight to the
	// worker.
	Load Load
	// Index is cache_aware's prefix index, shared with what keeps it fleet-wide. Default: a new
	// one bounded by CacheAware.
	Index *prefixindex.Index
	// Routes, when set, hears of cache_aware's every choice that told its index something new
	// (see Routes).
	Routes Routes
	// Now is cache_aware's clock, which times the index's uses and evictions. Default time.Now.
	Now func() time.Time
	// Logger receives what goes wrong in the background. Default slog.Default().
	Logger *slog.Logger
}

// New returns the policy called name.
func New(name string, o Options) (Policy, error) {
	if o.PrefixUnits <= 0 {
		o.PrefixUnits = 256
	}
	rnd := newRandSource(o.Seed)
	switch name {
	case RoundRobin, "":
		return &roundRobin{}, nil
	case Random:
		return &random{rnd: rnd}, nil
	case LeastRequest:
		return &leastRequest{}, nil
	case PowerOfTwo:
		return &powerOfTwo{rnd: rnd}, nil
	case ConsistentHashing:
		return &consistentHash{}, nil
	case PrefixHash:
		return &prefixHash{bytes: 4 * o.PrefixUnits}, nil
	case CacheAware:
		if r := o.CacheAware.Rule; r != "" && r != RuleCost && r != RuleSMG {
			return nil, fmt.Errorf("cache rule %q is not one of %s", r, strings.Join(CacheRules(), ", "))
		}
		return newCacheAware(o), nil
	}
	return nil, fmt.Errorf("%q is not one of %s", name, strings.Join(Names(), ", "))
}

// randSource returns numbers in [0, n): the runtime's lock-free generator, or a seeded one
// behind a mutex.
type randSource struct {
	mu sync.Mutex
	r  *rand.Rand // nil: use the runtime's generator
}

func newRandSource(seed uint64) *randSource {
	if seed == 0 {
		return &randSource{}
	}
	return &randSource{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (s *randSource) intN(n int) int {
	if s.r == nil {
		return rand.IntN(n)
	}
	s.mu.Lock()
	v := s.r.IntN(n)
	s.mu.Unlock()
	return v
}

// roundRobin cycles over the candidates with one shared counter.
type roundRobin struct{ next atomic.Uint64 }

func (*roundRobin) Name() string { return RoundRobin }

// Pick does not advance the counter when there is no choice, so a retry that has only one
// candidate left does not skew the rotation of the next requests.
func (p *roundRobin) Pick(c []*pool.Worker, _ *Request) *pool.Worker {
	if len(c) == 1 {
		return c[0]
	}
	return c[(p.next.Add(1)-1)%uint64(len(c))]
}

// random picks uniformly.
type random struct{ rnd *randSource }

func (*random) Name() string { return Random }

func (p *random) Pick(c []*pool.Worker, _ *Request) *pool.Worker { return c[p.rnd.intN(len(c))] }

// leastRequest picks the candidate with the fewest requests in flight; ties go round robin so
// that an idle fleet still spreads.
type leastRequest struct{ next atomic.Uint64 }

func (*leastRequest) Name() string { return LeastRequest }

func (p *leastRequest) Pick(c []*pool.Worker, _ *Request) *pool.Worker {
	n := len(c)
	start := int((p.next.Add(1) - 1) % uint64(n))
	best := c[start]
	bestLoad := best.Inflight()
	for i := 1; i < n && bestLoad > 0; i++ {
		w := c[(start+i)%n]
		if l := w.Inflight(); l < bestLoad {
			best, bestLoad = w, l
		}
	}
	return best
}

// powerOfTwo samples two distinct candidates and keeps the less loaded.
type powerOfTwo struct{ rnd *randSource }

func (*powerOfTwo) Name() string { return PowerOfTwo }

func (p *powerOfTwo) Pick(c []*pool.Worker, _ *Request) *pool.Worker {
	n := len(c)
	if n == 1 {
		return c[0]
	}
	i := p.rnd.intN(n)
	j := p.rnd.intN(n - 1)
	if j >= i {
		j++
	}
	a, b := c[i], c[j]
	if b.Inflight() < a.Inflight() {
		return b
	}
	return a
}

// consistentHash maps X-Mesh-Routing-Key to a worker by rendezvous (highest random weight)
// hashing, so adding or removing one of N workers moves only about 1/N of the keys. Without a
// key it falls back to round robin.
type consistentHash struct{ fallback roundRobin }

func (*consistentHash) Name() string { return ConsistentHashing }

func (p *consistentHash) Pick(c []*pool.Worker, r *Request) *pool.Worker {
	if r == nil || len(r.RoutingKey) == 0 {
		return p.fallback.Pick(c, r)
	}
	return rendezvous(c, pool.HashBytes(r.RoutingKey))
}

// prefixHash maps the first bytes of the prompt to a worker by rendezvous hashing, so requests
// sharing a prompt prefix land on the worker that holds its KV cache. Without a prompt it falls
// back to round robin.
type prefixHash struct {
	bytes    int
	fallback roundRobin
}

func (*prefixHash) Name() string { return PrefixHash }

func (p *prefixHash) Pick(c []*pool.Worker, r *Request) *pool.Worker {
	if r == nil || len(r.Prompt) == 0 {
		return p.fallback.Pick(c, r)
	}
	prefix := r.Prompt
	if len(prefix) > p.bytes {
		prefix = prefix[:p.bytes]
	}
	return rendezvous(c, pool.HashBytes(prefix))
}

// rendezvous returns the candidate with the highest score for key; each worker's score depends
// only on (key, worker), which is what makes the mapping stable as candidates come and go.
func rendezvous(c []*pool.Worker, key uint64) *pool.Worker {
	best := c[0]
	bestScore := worker.Mix(key ^ best.Hash)
	for _, w := range c[1:] {
		if s := worker.Mix(key ^ w.Hash); s > bestScore {
			best, bestScore = w, s
		}
	}
	return best
}
