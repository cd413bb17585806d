package cachesync

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// fleetLoads is what subscriptions published of the workers' loads, read by Load without a lock:
// a map replaced when a worker appears, and one atomic counter per worker.
type fleetLoads struct {
	mu    sync.Mutex                               // serializes additions to cells
	cells atomic.Pointer[map[uint64]*atomic.Int64] // worker hash → published load
}

func newFleetLoads() *fleetLoads {
	l := &fleetLoads{}
	l.cells.Store(&map[uint64]*atomic.Int64{})
	return l
}

// get returns the worker's published load, 0 when none was.
func (l *fleetLoads) get(hash uint64) int64 {
	if c := (*l.cells.Load())[hash]; c != nil {
		return c.Load()
	}
	return 0
}

// set publishes the worker's load.
func (l *fleetLoads) set(hash uint64, n int64) {
	if c := (*l.cells.Load())[hash]; c != nil {
		c.Store(n)
		return
	}
	if n == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := *l.cells.Load()
	if c := old[hash]; c != nil {
		c.Store(n)
		return
	}
	c := &atomic.Int64{}
	c.Store(n)
	cells := maps.Clone(old)
	cells[hash] = c
	l.cells.Store(&cells)
}

// ownerLoads keeps, on the owner, each reporter's last load report: per reporter, when it came
// and its requests in flight per worker.
type ownerLoads struct {
	expiry time.Duration

	mu   sync.Mutex
	from map[string]*loadReport
}

type loadReport struct {
	at      time.Time
	workers map[worker.ID]int64
}

func newOwnerLoads(expiry time.Duration) *ownerLoads {
	return &ownerLoads{expiry: expiry, from: make(map[string]*loadReport)}
}

// report replaces what from reported before.
func (o *ownerLoads) report(from string, workers map[worker.ID]int64, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.from[from] = &loadReport{at: now, workers: workers}
}

// forget drops what from reported (it left, or its stream ended).
func (o *ownerLoads) forget(from string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.from, from)
}

// sums returns, per worker, the fresh reports' sum, and per reporter what it added to it, so
// that a subscriber's share can be taken out; reports older than the expiry are dropped.
func (o *ownerLoads) sums(now time.Time) (total map[worker.ID]int64, by map[string]map[worker.ID]int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	total, by = make(map[worker.ID]int64), make(map[string]map[worker.ID]int64, len(o.from))
	for from, r := range o.from {
		if now.Sub(r.at) > o.expiry {
			delete(o.from, from)
			continue
		}
		by[from] = r.workers
		for id, n := range r.workers {
			total[id] += n
		}
	}
	return total, by
}
