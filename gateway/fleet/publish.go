package fleet

import (
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/worker"
)

// BulletinSink gossips the bulletins of owned workers; *mesh.Mesh implements it.
type BulletinSink interface {
	Publish(b mesh.Bulletin)
	Withdraw(worker string)
}

// OwnedStatus reads an owned worker's runtime state; *owned.Manager implements it.
type OwnedStatus interface {
	Status(id worker.ID) (owned.Status, bool)
}

// maxLastError bounds the last error a bulletin carries, so that one fits a gossip packet.
const maxLastError = 200

// Publisher turns the changes owned.Manager tells (Options.OnChange and OnForget) into
// bulletins. Changed and Forgotten only take note, so they are safe on the request path and
// under a breaker's lock; a goroutine reads each noted worker's state and hands the bulletin
// to the sink, which coalesces and gossips it. Host-local (ipc://) workers are never published.
type Publisher struct {
	sink   BulletinSink
	status OwnedStatus
	pool   *pool.Pool
	now    func() time.Time
	log    *slog.Logger

	mu    sync.Mutex
	dirty map[worker.ID]bool // true: changed; false: forgotten

	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	startOnce sync.Once
	stopOnce  sync.Once
}

// NewPublisher returns a Publisher that takes note of changes; Start runs it, Close stops it.
// now nil is time.Now.
func NewPublisher(sink BulletinSink, p *pool.Pool, now func() time.Time, log *slog.Logger) *Publisher {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Publisher{sink: sink, pool: p, now: now, log: log.With("component", "fleet"),
		dirty: make(map[worker.ID]bool), wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// Start publishes what is noted, each worker's state read from status: the owned.Manager,
// which is built on the publisher's Changed and Forgotten, hence given here and not to
// NewPublisher. What was noted before Start is published then. Only the first call counts.
func (p *Publisher) Start(status OwnedStatus) {
	p.startOnce.Do(func() {
		p.status = status
		go p.run()
	})
}

// Changed notes that an owned worker's state changed (owned.Options.OnChange).
func (p *Publisher) Changed(id worker.ID) { p.note(id, true) }

// Forgotten notes that this gateway no longer manages a worker (owned.Options.OnForget).
func (p *Publisher) Forgotten(id worker.ID) { p.note(id, false) }

func (p *Publisher) note(id worker.ID, changed bool) {
	p.mu.Lock()
	p.dirty[id] = changed
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Close stops the goroutine; what was noted and not yet sent is dropped.
func (p *Publisher) Close() {
	p.startOnce.Do(func() { close(p.done) }) // never started: nothing to wait for
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
}

func (p *Publisher) run() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
			p.Flush()
		}
	}
}

// Flush publishes what was noted; the goroutine calls it on each note, tests directly.
func (p *Publisher) Flush() {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("panic publishing bulletins", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	p.mu.Lock()
	dirty := p.dirty
	p.dirty = make(map[worker.ID]bool, len(dirty))
	p.mu.Unlock()
	for id, changed := range dirty {
		if !changed {
			p.sink.Withdraw(string(id))
			continue
		}
		if b, ok := p.bulletin(id); ok {
			p.sink.Publish(b)
		}
	}
}

// bulletin is the owned worker's current state, false when it is no longer owned, not in the
// pool, or host-local.
func (p *Publisher) bulletin(id worker.ID) (mesh.Bulletin, bool) {
	st, ok := p.status.Status(id)
	w := p.pool.Get(id)
	if !ok || w == nil || worker.IsHostLocalURL(w.URL) {
		return mesh.Bulletin{}, false
	}
	return ownedBulletin(id, &st, w, p.now()), true
}

// ownedBulletin is the bulletin of an owned worker in state st, w its pool worker, at now;
// Owner and Seq are the mesh's to set.
func ownedBulletin(id worker.ID, st *owned.Status, w *pool.Worker, now time.Time) mesh.Bulletin {
	b := mesh.Bulletin{
		Worker: string(id), Epoch: st.Epoch,
		Health: w.Health(), HealthFailures: st.ConsecutiveFailures, HealthSuccesses: st.ConsecutiveSuccesses,
		Breaker: st.Breaker.State, BreakerFailures: st.Breaker.ConsecutiveFailures,
		LastError: truncate(st.LastError, maxLastError), LastStatusCode: st.LastStatusCode, LastProbe: st.LastProbe,
		Models: w.DiscoveredModels(), ActiveRequests: w.Inflight(), ProbeInterval: st.Interval,
	}
	switch st.Breaker.State {
	case breaker.HalfOpen:
		b.BreakerSuccesses = st.Breaker.ConsecutiveSuccesses
	case breaker.Open:
		b.BreakerReopenIn = max(0, st.Breaker.ReopensAt.Sub(now))
	}
	return b
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Back up to the start of the character the cut falls in (at most 3 bytes: UTF-8 runes are
	// at most 4 long), so that valid text stays valid.
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i]
		}
	}
	return s[:n]
}
