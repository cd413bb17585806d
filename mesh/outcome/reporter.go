package outcome

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Config configures a Reporter. Zero fields have the defaults given.
type Config struct {
	// From is this gateway's node id, sent with each batch. Reports whose owner is From are
	// skipped: the owned manager records this gateway's own workers.
	From string
	// Resolve returns an owner's gRPC address (host:port) from its node id; ok false when it is
	// not known. It is called from the background loops, never from Report. Required.
	Resolve func(owner string) (addr string, ok bool)
	// DialOptions are given to grpc.NewClient for each owner. Default: insecure transport
	// credentials.
	DialOptions []grpc.DialOption
	// FlushInterval is how often an owner's pending runs are sent (default 100 ms).
	FlushInterval time.Duration
	// MaxBatch is the most runs in one message; an owner whose pending runs reach it is flushed
	// at once (default 1024). Above MaxPending, only the FlushInterval flushes.
	MaxBatch int
	// MaxPending is the most runs waiting for one owner; a report that would add a run beyond it
	// is dropped (default 16384).
	MaxPending int
	// IdleTimeout is how long an owner gets no report before its loop and connection are closed
	// (default 1 minute).
	IdleTimeout time.Duration
	// OpenTimeout bounds opening a stream, connecting included (default 5 s).
	OpenTimeout time.Duration
	// SendTimeout bounds one flush's sends on an open stream; an owner slower than that gets
	// its stream cut and opened again (default 5 s).
	SendTimeout time.Duration
	// MaxBackoff caps the wait before opening a stream again after a failure; the wait starts at
	// FlushInterval and doubles (default 5 s). Reports flushed meanwhile are dropped.
	MaxBackoff time.Duration
	// CloseTimeout bounds each owner's last flush at Close (default 1 s).
	CloseTimeout time.Duration
	// Metrics counts sent and dropped reports. Default: counters on a private registry.
	Metrics *Metrics
	// Logger receives a line when an owner becomes unreachable and when it is reached again.
	// Default: slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.FlushInterval, 100*time.Millisecond)
	def(&c.IdleTimeout, time.Minute)
	def(&c.OpenTimeout, 5*time.Second)
	def(&c.SendTimeout, 5*time.Second)
	def(&c.MaxBackoff, 5*time.Second)
	def(&c.CloseTimeout, time.Second)
	if c.MaxPending <= 0 {
		c.MaxPending = 16384
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 1024
	}
	if c.DialOptions == nil {
		c.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	if c.Metrics == nil {
		c.Metrics = mustPrivateMetrics()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Reporter sends the outcomes of requests proxied to workers owned by other gateways to their
// owners: one queue, background loop and gRPC stream per owner. Report never blocks.
type Reporter struct {
	cfg  Config
	met  *Metrics
	log  *slog.Logger
	life context.Context // canceled by Close
	stop context.CancelFunc
	wg   sync.WaitGroup // the owners' loops; Add only under mu while not closed

	mu     sync.RWMutex // guards owners and closed; taken before any queue's mu
	owners map[string]*ownerQueue
	closed bool
}

// NewReporter returns a running Reporter; Close stops it.
func NewReporter(cfg Config) (*Reporter, error) {
	if cfg.Resolve == nil {
		return nil, errors.New("outcome: Config.Resolve is required")
	}
	cfg.setDefaults()
	r := &Reporter{cfg: cfg, met: cfg.Metrics, log: cfg.Logger, owners: make(map[string]*ownerQueue)}
	r.life, r.stop = context.WithCancel(context.Background())
	return r, nil
}

// Report queues one outcome of worker (at the epoch of its record, as this gateway knows it)
// for its owner. It is cheap and never blocks: consecutive identical outcomes of one worker
// merge into one run, and a report beyond the owner's MaxPending runs is dropped and counted.
// An outcome other than Success or Failure, an empty owner, and this gateway as owner are
// skipped.
func (r *Reporter) Report(owner, worker string, epoch uint64, o Outcome) {
	if !o.valid() || owner == "" || owner == r.cfg.From {
		return
	}
	for {
		q := r.queue(owner)
		if q == nil {
			r.met.dropped.Inc() // closed
			return
		}
		switch q.add(worker, epoch, o) {
		case added:
			return
		case queueFull:
			r.met.dropped.Inc()
			return
		}
		// retired: its loop ended after the lookup; the next lookup starts a new one
	}
}

// queue returns the owner's queue, starting it if needed; nil once the Reporter is closed.
func (r *Reporter) queue(owner string) *ownerQueue {
	r.mu.RLock()
	q, closed := r.owners[owner], r.closed
	r.mu.RUnlock()
	if q != nil || closed {
		return q
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if q = r.owners[owner]; q == nil {
		q = newOwnerQueue(r, owner)
		r.owners[owner] = q
		r.wg.Add(1)
		go q.run(r.life)
	}
	return q
}

// retire removes q from the owners if it is still the owner's queue.
func (r *Reporter) retire(q *ownerQueue) {
	if r.owners[q.owner] == q {
		delete(r.owners, q.owner)
	}
}

// Close stops every owner's loop, after a last flush bounded by CloseTimeout, closes their
// connections and waits. Reports after Close are dropped and counted. Calling it again does
// nothing.
func (r *Reporter) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.stop()
	r.wg.Wait()
}
