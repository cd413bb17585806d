package fleet

import (
	"context"
	"sync"
	"time"
)

// appliedPoll is how often WaitApplied looks at the applied index again when the reconciler
// has no AppliedSignal: an entry that changes no record (a disable of a disabled worker, a
// rejected write) is applied by raft without a Watch signal, so no pass runs for it.
const appliedPoll = time.Millisecond

// poolIndex is the raft index the pool has applied and published, with a signal for waiters.
type poolIndex struct {
	mu      sync.Mutex
	index   uint64
	changed chan struct{} // closed and replaced when index grows
}

func newPoolIndex() poolIndex { return poolIndex{changed: make(chan struct{})} }

// advance raises the index to i (never lowers it) and wakes the waiters.
func (p *poolIndex) advance(i uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i <= p.index {
		return
	}
	p.index = i
	close(p.changed)
	p.changed = make(chan struct{})
}

// get returns the index and a channel closed when it next grows.
func (p *poolIndex) get() (uint64, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.index, p.changed
}

// AppliedIndex returns the raft index the pool reflects: every entry up to it has been applied
// to the pool and the pool's snapshot holding it is published, so the data plane's next
// selection sees it. It is what this gateway acknowledges to a fleet-acknowledged write.
func (r *Reconciler) AppliedIndex() uint64 {
	i, _ := r.poolIndex.get()
	return i
}

// WaitApplied returns the pool's applied index once it is at least index, or when ctx ends
// (the index then is below). While this gateway's raft state is not current (CaughtUp has not
// closed) the pool does not follow raft, so it cannot reach an index raft applied since.
func (r *Reconciler) WaitApplied(ctx context.Context, index uint64) uint64 {
	var tick *time.Ticker
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		var applied <-chan struct{} // read before the indexes: no entry slips between
		if r.cfg.AppliedSignal != nil {
			applied = r.cfg.AppliedSignal()
		}
		got, changed := r.poolIndex.get()
		if got >= index {
			return got
		}
		if r.current.Load() && r.appliedIndex() >= index {
			// Raft applied it but no pass ran for it yet (no signal, or the loop is busy): run
			// one here. It is serialized with the loop's and changes only what differs.
			r.Reconcile()
			if got, _ = r.poolIndex.get(); got >= index {
				return got
			}
		}
		var poll <-chan time.Time
		if applied == nil {
			if tick == nil {
				tick = time.NewTicker(appliedPoll)
			}
			poll = tick.C
		}
		select {
		case <-ctx.Done():
			return got
		case <-changed:
		case <-applied:
		case <-poll:
		}
	}
}

// appliedIndex is the raft index of the last entry Records applied, 0 when not configured.
func (r *Reconciler) appliedIndex() uint64 {
	if r.cfg.AppliedIndex == nil {
		return 0
	}
	return r.cfg.AppliedIndex()
}
