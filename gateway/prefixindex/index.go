package prefixindex

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config, which are SMG's.
const (
	DefaultMaxChars         = 1 << 26 // 67,108,864
	DefaultEvictionInterval = 120 * time.Second
)

// Config bounds an Index.
type Config struct {
	// MaxChars bounds the routing text the index holds for one model, in bytes, all workers
	// together (a block shared by two workers counts twice). Each eviction brings every model
	// back to at most MaxChars; between evictions a model that passes twice MaxChars makes the
	// next one due at once. Default DefaultMaxChars (SMG's --max-tree-size).
	MaxChars int64
	// EvictionInterval is how often Due reports an eviction. Default DefaultEvictionInterval;
	// negative: only when a model passes twice MaxChars.
	EvictionInterval time.Duration
	// OnEvict, when set, is called after an eviction removed blocks from a worker's entry, with
	// the removed blocks, each with the eviction's cut as its last use: the Delta.Evicted that
	// tells another index of the eviction. It is called without the index's locks held, from
	// the goroutine that runs Evict; evicted is reused once it returns.
	OnEvict func(model string, worker Worker, evicted []BlockUse)
}

// Index holds, per model, each worker's entry: the blocks of routing text it was sent. It is
// safe for concurrent use.
type Index struct {
	cfg Config

	mu     sync.Mutex                        // serializes additions to models
	models atomic.Pointer[map[string]*Model] // replaced, never changed: read without a lock

	lastEvict atomic.Int64 // unix ns when the last eviction started; 0 before the first Due
	evicting  atomic.Bool  // Due claimed an eviction that has not ended
	overCap   atomic.Bool  // a model passed twice MaxChars
}

// New returns an empty index.
func New(cfg Config) *Index {
	if cfg.MaxChars <= 0 {
		cfg.MaxChars = DefaultMaxChars
	}
	if cfg.EvictionInterval == 0 {
		cfg.EvictionInterval = DefaultEvictionInterval
	}
	x := &Index{cfg: cfg}
	x.models.Store(&map[string]*Model{})
	return x
}

// Model returns the index of the model called name, made empty on first use. It takes no lock
// and does not allocate once the model exists.
func (x *Index) Model(name []byte) *Model {
	if m := (*x.models.Load())[string(name)]; m != nil {
		return m
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	old := *x.models.Load()
	if m := old[string(name)]; m != nil {
		return m
	}
	m := &Model{x: x, name: string(name), workers: map[Worker]*entry{}}
	models := maps.Clone(old)
	models[string(name)] = m
	x.models.Store(&models)
	return m
}

// Models returns the names of the models the index holds, in no order.
func (x *Index) Models() []string {
	models := *x.models.Load()
	names := make([]string, 0, len(models))
	for name := range models {
		names = append(names, name)
	}
	return names
}

// modelList returns the models, for a pass over all of them.
func (x *Index) modelList() []*Model {
	models := *x.models.Load()
	ms := make([]*Model, 0, len(models))
	for _, m := range models {
		ms = append(ms, m)
	}
	return ms
}

// Worker names a worker in an index: a 64-bit key that every gateway computes the same from
// the worker's id (pool.Worker.Hash), so that an entry keeps its name from one index to another.
type Worker uint64

// Model is one model's part of an index: an entry per worker.
type Model struct {
	x    *Index
	name string

	mu      sync.RWMutex
	workers map[Worker]*entry
	size    int64 // text bytes of every entry's blocks
	blocks  int   // blocks of every entry
}

// entry is one worker's blocks: hash → last use. A last use is in unix nanoseconds, less the
// block's position in the text that used it last, so that among the blocks of one text the
// deeper ones are the older: eviction, oldest first, then takes a text's end before its start,
// and what a worker keeps of a text stays a prefix of it.
type entry struct {
	blocks map[uint64]int64
	size   int64 // text bytes of its blocks
	peak   int   // most blocks it held since its map was made
}

// Match is what the index knows of one worker for one text.
type Match struct {
	// Len is how many bytes of the text's start the worker was sent: whole blocks, and the
	// whole text when its last, partial block matched too.
	Len int
	// Held is how many bytes of text the worker's entry holds, every text together.
	Held int64
}

// Lookup fills out[i] with what the index knows of workers[i] for the text b; out must be as
// long as workers. It allocates nothing.
func (m *Model) Lookup(b *Blocks, workers []Worker, out []Match) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for i, w := range workers {
		e := m.workers[w]
		if e == nil {
			out[i] = Match{}
			continue
		}
		out[i] = Match{Len: b.MatchedLen(e.matched(b.Hashes)), Held: e.size}
	}
}

// matched returns how many of the first hashes the entry holds. A held block stands for its
// whole prefix (the hashes are chained), and what an entry keeps of a text is a prefix of it,
// so the answer is found by bisection: a few map reads whatever the text's length.
func (e *entry) matched(hs []uint64) int {
	held := func(i int) bool { _, ok := e.blocks[hs[i]]; return ok }
	n := len(hs)
	if n == 0 || !held(0) {
		return 0
	}
	if held(n - 1) {
		return n
	}
	lo, hi := 1, n-1 // blocks before lo are held; block hi is not
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if held(mid) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// Insert records that worker was sent the text b at now: every block of it is the worker's,
// last used now (the uses Blocks.Uses lists). Unlike Apply, it does not compare with the uses
// recorded before: the local clock moves forward.
func (m *Model) Insert(worker Worker, b *Blocks, now time.Time) {
	if len(b.Hashes) == 0 {
		return
	}
	t := now.UnixNano()
	m.mu.Lock()
	e := m.entryLocked(worker, len(b.Hashes))
	for i, h := range b.Hashes {
		n := len(e.blocks)
		e.blocks[h] = t - int64(i)
		if len(e.blocks) > n {
			m.addedLocked(e, h)
		}
	}
	over := m.size > 2*m.x.cfg.MaxChars
	m.mu.Unlock()
	if over {
		m.x.overCap.Store(true)
	}
}

// InsertReport is Insert that also appends to dst the uses another index needs to learn of
// this insert: each block that was not in the worker's entry, and each whose last use there was
// more than stale before now (so that the other index's least-recently-used order stays within
// stale of this one's without hearing of every use). A text whose blocks all are held and fresh
// appends nothing.
func (m *Model) InsertReport(worker Worker, b *Blocks, now time.Time, stale time.Duration, dst []BlockUse) []BlockUse {
	if len(b.Hashes) == 0 {
		return dst
	}
	t := now.UnixNano()
	old := t - int64(stale)
	m.mu.Lock()
	e := m.entryLocked(worker, len(b.Hashes))
	for i, h := range b.Hashes {
		last := t - int64(i)
		prev, ok := e.blocks[h]
		e.blocks[h] = last
		switch {
		case !ok:
			m.addedLocked(e, h)
			dst = append(dst, BlockUse{Hash: h, Last: last})
		case prev < old:
			dst = append(dst, BlockUse{Hash: h, Last: last})
		}
	}
	over := m.size > 2*m.x.cfg.MaxChars
	m.mu.Unlock()
	if over {
		m.x.overCap.Store(true)
	}
	return dst
}

// Name returns the model's name, as Index.Model took it.
func (m *Model) Name() string { return m.name }

// entryLocked returns worker's entry, made with room for n blocks when it has none.
func (m *Model) entryLocked(worker Worker, n int) *entry {
	e := m.workers[worker]
	if e == nil {
		e = &entry{blocks: make(map[uint64]int64, n)}
		m.workers[worker] = e
	}
	return e
}

// useLocked records a use of block h at last, keeping the latest use.
func (m *Model) useLocked(e *entry, h uint64, last int64) {
	old, ok := e.blocks[h]
	switch {
	case !ok:
		e.blocks[h] = last
		m.addedLocked(e, h)
	case last > old:
		e.blocks[h] = last
	}
}

// addedLocked counts block h, just added to e.
func (m *Model) addedLocked(e *entry, h uint64) {
	n := int64(BlockLen(h))
	e.size += n
	m.size += n
	m.blocks++
	e.peak = max(e.peak, len(e.blocks))
}

// Size returns the bytes of text the model's entries hold, all workers together.
func (m *Model) Size() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.size
}

// Held returns the bytes of text worker's entry holds.
func (m *Model) Held(worker Worker) int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if e := m.workers[worker]; e != nil {
		return e.size
	}
	return 0
}
