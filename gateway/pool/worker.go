package pool

import (
	"reflect"
	"slices"
	"sync/atomic"
	"unique"

	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// Origins of a worker in this gateway's view.
const (
	OriginLocal = "local" // registered at this gateway (flags, config file, admin API)
	OriginMesh  = "mesh"  // imported read-only from its owner's bulletins
)

// Gate is one reason a worker is not routable. A worker is routable when its gate word is zero;
// every subsystem sets or clears only its own gate, so none of them overwrites another's verdict.
type Gate uint32

// The gates a worker can be closed by.
const (
	GateDisabled Gate = 1 << iota // the raft record says disabled
	GateDead                      // the raft record says is_dead (manual quarantine)
	GateNotReady                  // health state is not ready
	GateDraining                  // its health state is draining (its owner stopped probing it)
	GateRemoving                  // the raft record is draining: a DELETE was accepted, the owner removes it
	// GateHung is this gateway's own, local verdict: a request to the worker got no answer
	// within the request timeout, so no new request goes to it from here until the hold ends
	// (Pool.HoldHung): its deadline, or a change of the owner's verdict on it.
	GateHung
)

// Breaker is what selection asks of a worker's circuit breaker. A nil breaker always allows.
type Breaker interface {
	Allow() bool
}

// Transport is the per-worker connection pool the data plane attaches to a worker; the pool
// closes it when the worker is replaced or removed.
type Transport interface {
	Close()
}

// Worker is one worker in this gateway's view. Its identity and spec are immutable: a changed spec
// replaces the Worker with a new one. Load, gates, health and breaker are shared atomics so the
// data plane reads them without locks.
type Worker struct {
	ID        worker.ID
	DisplayID string
	URL       string // canonical URL; also the metric label
	Caps      worker.Capability
	Models    []string // empty means any model
	Origin    string
	// Hash is a stable 64-bit hash of ID, used by the hashing policies.
	Hash uint64
	// RegionKey is the spec's region, interned (unique.Make, "" included): workers of one
	// region share it, so locality routing compares regions as one word. Set by the pool.
	RegionKey unique.Handle[string]

	spec      worker.Spec // normalized, API key included: read it through Spec or APIKey
	transport Transport

	inflight atomic.Int64
	gates    atomic.Uint32
	health   atomic.Uint32 // health.State; set when the pool adds the worker
	breaker  atomic.Pointer[breakerBox]
	owner    atomic.Pointer[ownership]
	// discovered are the models the worker said it serves when its owner asked (runtime state:
	// GET /v1/models lists them for a worker that declares none; routing ignores them).
	discovered atomic.Pointer[[]string]
	// cache counts what the worker's answers through this gateway said of its prefix cache;
	// shared with the Workers that replace this one, so a spec change keeps the counts.
	cache *cacheTokens
}

// cacheTokens are a worker's prompt tokens and, of them, the cached ones, as its answers
// reported them; and the bytes of routing text this gateway's cache_aware picks sent it and, of
// them, the ones its prefix index predicted the worker held.
type cacheTokens struct{ tokens, predicted share }

// share is a count and the part of it that hit, added to and read without a lock, so that a
// reader never sees more of the part than of the whole: add adds the whole first, load reads
// the part first.
type share struct{ whole, part atomic.Uint64 }

func (s *share) add(whole, part uint64) {
	s.whole.Add(whole)
	s.part.Add(part)
}

func (s *share) load() (whole, part uint64) {
	part = s.part.Load()
	return s.whole.Load(), part
}

type breakerBox struct{ b Breaker }

func newWorker(spec worker.Spec, origin string) *Worker {
	w := &Worker{
		ID:        spec.ID(),
		DisplayID: spec.DisplayID(),
		URL:       spec.URL,
		Caps:      spec.Caps(),
		Models:    slices.Clone(spec.Models),
		Origin:    origin,
		spec:      spec,
		cache:     &cacheTokens{},
	}
	w.Hash = HashString(string(w.ID))
	w.RegionKey = unique.Make(spec.Region)
	return w
}

// Spec returns a copy of the worker's spec without its API key.
func (w *Worker) Spec() worker.Spec { return w.spec.Redacted() }

// SameSpec reports whether s, normalized, is the worker's spec (API key included).
func (w *Worker) SameSpec(s worker.Spec) bool { return reflect.DeepEqual(w.spec, s) }

// ConnectionMode is the spec's connection_mode, read without copying the spec.
func (w *Worker) ConnectionMode() string { return w.spec.ConnectionMode }

// Region is the spec's region ("" when it has none), read without copying the spec.
func (w *Worker) Region() string { return w.spec.Region }

// Provider is the spec's provider (external workers only), read without copying the spec.
func (w *Worker) Provider() string { return w.spec.Provider }

// APIKey returns the key the data plane forwards as a bearer token; never log or return it.
func (w *Worker) APIKey() string { return w.spec.APIKey }

// Resilience returns the worker's resilience overrides, nil when none are set. Read only.
func (w *Worker) Resilience() *worker.Resilience { return w.spec.Resilience }

// Transport returns what the data plane attached to the worker (nil when nothing is attached).
func (w *Worker) Transport() Transport { return w.transport }

// Inflight returns the number of requests in flight to the worker from this gateway.
func (w *Worker) Inflight() int64 { return w.inflight.Load() }

// Acquire counts a request in flight; call Release when it ends.
func (w *Worker) Acquire() { w.inflight.Add(1) }

// Release ends a request counted by Acquire.
func (w *Worker) Release() { w.inflight.Add(-1) }

// Gates returns the closed gates; zero means routable as far as the gates go.
func (w *Worker) Gates() Gate { return Gate(w.gates.Load()) }

// Health returns the worker's health state.
func (w *Worker) Health() health.State { return health.State(w.health.Load()) }

// ownership is who owns the worker and since which epoch, swapped as one.
type ownership struct {
	owner string
	epoch uint64
}

// Owner returns the node id of the worker's owner ("" until one is set).
func (w *Worker) Owner() string {
	if p := w.owner.Load(); p != nil {
		return p.owner
	}
	return ""
}

// OwnerEpoch returns the worker's owner and the epoch of its record (the fencing token that
// bulletins and outcome reports carry); "" and 0 until one is set.
func (w *Worker) OwnerEpoch() (string, uint64) {
	if p := w.owner.Load(); p != nil {
		return p.owner, p.epoch
	}
	return "", 0
}

// Allow asks the worker's breaker whether it takes traffic; true without a breaker.
func (w *Worker) Allow() bool {
	if b := w.breaker.Load(); b != nil {
		return b.b.Allow()
	}
	return true
}

// DiscoveredModels returns the models the worker said it serves when its owner asked, nil
// before it answered. The slice is shared: do not modify it.
func (w *Worker) DiscoveredModels() []string {
	if p := w.discovered.Load(); p != nil {
		return *p
	}
	return nil
}

// ListedModels returns what GET /v1/models lists for the worker: its declared models, else the
// discovered ones (nil when it declares none and none were discovered). The slice is shared: do
// not modify it.
func (w *Worker) ListedModels() []string {
	if len(w.Models) > 0 {
		return w.Models
	}
	return w.DiscoveredModels()
}

// Breaker returns the breaker attached to the worker, nil when none is.
func (w *Worker) Breaker() Breaker {
	if b := w.breaker.Load(); b != nil {
		return b.b
	}
	return nil
}

// ServesModel reports whether the worker serves model; an empty model or an empty model list
// matches anything. It does not allocate.
func (w *Worker) ServesModel(model []byte) bool {
	if len(model) == 0 || len(w.Models) == 0 {
		return true
	}
	for _, m := range w.Models {
		if m == string(model) {
			return true
		}
	}
	return false
}

// setGate opens (on=false) or closes (on=true) gate g and reports whether the word changed.
func (w *Worker) setGate(g Gate, on bool) bool {
	for {
		old := w.gates.Load()
		nw := old &^ uint32(g)
		if on {
			nw = old | uint32(g)
		}
		if nw == old {
			return false
		}
		if w.gates.CompareAndSwap(old, nw) {
			return true
		}
	}
}

// carryState copies runtime state from the worker this one replaces.
func (w *Worker) carryState(old *Worker) {
	w.gates.Store(old.gates.Load())
	w.health.Store(old.health.Load())
	w.breaker.Store(old.breaker.Load())
	w.owner.Store(old.owner.Load())
	w.discovered.Store(old.discovered.Load())
	w.cache = old.cache
}

// ObserveCache counts one answer's report: its prompt's tokens and how many of them the engine
// found in its prefix cache. It does not allocate.
func (w *Worker) ObserveCache(prompt, cached uint64) {
	if c := w.cache; c != nil { // nil only in a Worker made outside the pool
		c.tokens.add(prompt, cached)
	}
}

// CacheTokens returns the prompt tokens the worker's answers through this gateway reported,
// and of them the cached ones; cached never exceeds prompt.
func (w *Worker) CacheTokens() (prompt, cached uint64) {
	if c := w.cache; c != nil {
		return c.tokens.load()
	}
	return 0, 0
}

// ObservePrediction counts one cache_aware pick of the worker: the routing text's length and
// the part of it the prefix index predicted the worker holds, in bytes. It does not allocate.
func (w *Worker) ObservePrediction(text, matched uint64) {
	if c := w.cache; c != nil {
		c.predicted.add(text, matched)
	}
}

// Prediction returns the bytes of routing text this gateway's picks sent the worker, and of
// them the ones its index predicted the worker held; matched never exceeds text.
func (w *Worker) Prediction() (text, matched uint64) {
	if c := w.cache; c != nil {
		return c.predicted.load()
	}
	return 0, 0
}

// HashString is FNV-1a 64 followed by a murmur3 finalizer: stable across processes (every gateway
// of a mesh hashes a key the same way) and well mixed for rendezvous hashing.
func HashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return worker.Mix(h)
}

// HashBytes is HashString over a byte slice; it does not allocate.
func HashBytes(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return worker.Mix(h)
}
