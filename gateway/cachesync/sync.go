package cachesync

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/prefixindex"
	"github.com/meshgw/meshgw/worker"
)

// Defaults of Config.
const (
	DefaultFlushInterval    = 20 * time.Millisecond
	DefaultLoadRefresh      = 500 * time.Millisecond
	DefaultLoadExpiry       = time.Second
	DefaultMaxPendingBlocks = 1 << 16
)

// Workers lists the workers this gateway knows; *pool.Pool's Snapshot().All does.
type Workers func() []*pool.Worker

// Config configures a Sync. Zero fields have the defaults given.
type Config struct {
	// NodeID is this gateway's node id. Required.
	NodeID string
	// Index is the index cache_aware routes on (policy.Options.Index). Required; its
	// Config.OnEvict must call Sync.Evicted.
	Index *prefixindex.Index
	// Workers lists the workers this gateway knows. Required.
	Workers Workers
	// Owns reports whether this gateway owns a worker now. Required.
	Owns func(id worker.ID) bool
	// Peers lists the node ids of the live peers, this gateway left out. Required.
	Peers func() []string
	// Resolve returns a peer's gRPC address. Required.
	Resolve func(node string) (addr string, ok bool)
	// DialOptions are given to grpc.NewClient for each peer. Default: insecure credentials.
	DialOptions []grpc.DialOption
	// FlushInterval is how often reports are sent and publications made (default 20 ms).
	FlushInterval time.Duration
	// LoadInterval is how often this gateway's load is reported when it changed (default
	// FlushInterval: a worker's load is as fresh as its entry); LoadRefresh how often it is
	// reported again unchanged while not zero (500 ms).
	LoadInterval, LoadRefresh time.Duration
	// LoadExpiry is how long an owner counts a reporter's last load report (default 1 s).
	LoadExpiry time.Duration
	// MaxPendingBlocks bounds the blocks waiting for one peer, and for one subscriber's
	// publication (default 65,536, about 1 MiB).
	MaxPendingBlocks int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives a line when a peer becomes unreachable. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.FlushInterval, DefaultFlushInterval)
	def(&c.LoadInterval, c.FlushInterval)
	def(&c.LoadRefresh, DefaultLoadRefresh)
	def(&c.LoadExpiry, DefaultLoadExpiry)
	if c.MaxPendingBlocks <= 0 {
		c.MaxPendingBlocks = DefaultMaxPendingBlocks
	}
	if c.DialOptions == nil {
		c.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Stats counts what a Sync sent, took and dropped.
type Stats struct {
	// ReportBytes and ReportBlocks are what this gateway sent owners (encoded messages, and
	// blocks of index entries); UpdateBytes and UpdateBlocks what it sent subscribers.
	ReportBytes, ReportBlocks, UpdateBytes, UpdateBlocks atomic.Int64
	// AppliedBlocks are the blocks taken from peers' publications.
	AppliedBlocks atomic.Int64
	// Dropped are blocks never sent (a full batch, a peer down) or refused (not the owner).
	Dropped atomic.Int64
	// CutOff counts subscribers cut off for being too slow.
	CutOff atomic.Int64
}

// Sync is a gateway's part of the fleet-wide index and load: the reports of its choices to the
// owners, the owner's service, and the subscriptions to every peer. It implements
// policy.Routes and policy.Load.
type Sync struct {
	meshv1.UnimplementedCacheSyncServer
	cfg   Config
	log   *slog.Logger
	stats Stats
	loads *fleetLoads
	owned *ownerLoads
	pub   *publisher

	life context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu    sync.Mutex                       // serializes changes to links
	links atomic.Pointer[map[string]*link] // peer node id → link; replaced, never changed
}

// New returns a Sync; Start runs it, Register serves its service.
func New(cfg Config) (*Sync, error) {
	if cfg.NodeID == "" || cfg.Index == nil || cfg.Workers == nil || cfg.Owns == nil || cfg.Peers == nil || cfg.Resolve == nil {
		return nil, errors.New("cachesync: Config needs NodeID, Index, Workers, Owns, Peers and Resolve")
	}
	cfg.setDefaults()
	s := &Sync{cfg: cfg, log: cfg.Logger.With("component", "cachesync"), loads: newFleetLoads(), owned: newOwnerLoads(cfg.LoadExpiry)}
	s.pub = newPublisher(s)
	s.life, s.stop = context.WithCancel(context.Background())
	s.links.Store(&map[string]*link{})
	return s, nil
}

// Stats returns the counters.
func (s *Sync) Stats() *Stats { return &s.stats }

// Register serves the CacheSync service on srv.
func (s *Sync) Register(srv *grpc.Server) { meshv1.RegisterCacheSyncServer(srv, s) }

// Start runs the peers' loop and the publisher until Close.
func (s *Sync) Start() {
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.peersLoop() }()
	go func() { defer s.wg.Done(); s.pub.run(s.life) }()
}

// Close ends every stream, served or opened, and waits.
func (s *Sync) Close() {
	s.stop()
	s.wg.Wait()
}

// Load is cache_aware's load of w: the load its owner published (every gateway's but this
// one's), plus this gateway's own requests in flight now.
func (s *Sync) Load(w *pool.Worker) int64 { return s.loads.get(w.Hash) + w.Inflight() }

// Routed queues what a choice added to w's entry for w's owner (policy.Routes): a bounded
// append, or this gateway's own publication when it owns w.
func (s *Sync) Routed(w *pool.Worker, model []byte, uses []prefixindex.BlockUse) {
	owner, _ := w.OwnerEpoch()
	if owner == s.cfg.NodeID || w.Origin != pool.OriginMesh {
		if s.cfg.Owns(w.ID) {
			s.pub.add(w.ID, model, uses, nil)
		}
		return
	}
	l := (*s.links.Load())[owner]
	if l == nil && owner != "" {
		l = s.addLink(owner) // a peer the peers' loop has not seen yet: once per peer
	}
	if l != nil && l.batch.add(w.ID, model, uses) {
		return
	}
	s.stats.Dropped.Add(int64(len(uses)))
}

// Evicted is the index's Config.OnEvict: the evicted blocks of a worker this gateway owns are
// published.
func (s *Sync) Evicted(model string, w prefixindex.Worker, gone []prefixindex.BlockUse) {
	for _, pw := range s.cfg.Workers() {
		if pw.Hash == uint64(w) {
			if s.cfg.Owns(pw.ID) {
				s.pub.add(pw.ID, []byte(model), nil, gone)
			}
			return
		}
	}
}

// peersLoop keeps one link per live peer, and reports this gateway's loads to them.
func (s *Sync) peersLoop() {
	t := time.NewTicker(s.cfg.LoadInterval)
	defer t.Stop()
	defer s.closeLinks()
	for {
		s.syncLinks()
		s.reportLoads()
		select {
		case <-s.life.Done():
			return
		case <-t.C:
		}
	}
}

// syncLinks opens a link to each new peer and closes those to peers gone.
func (s *Sync) syncLinks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.links.Load()
	want := make(map[string]bool)
	for _, p := range s.cfg.Peers() {
		if p != s.cfg.NodeID {
			want[p] = true
		}
	}
	links := maps.Clone(old)
	changed := false
	for p := range want {
		if links[p] == nil {
			links[p] = s.startLink(p)
			changed = true
		}
	}
	for p, l := range links {
		if !want[p] {
			l.close()
			delete(links, p)
			s.owned.forget(p)
			changed = true
		}
	}
	if changed {
		s.links.Store(&links)
	}
}

// addLink returns the link to peer, started when there is none (nil once the Sync is closed).
func (s *Sync) addLink(peer string) *link {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.links.Load()
	if l := old[peer]; l != nil || s.life.Err() != nil {
		return l
	}
	links := maps.Clone(old)
	l := s.startLink(peer)
	links[peer] = l
	s.links.Store(&links)
	return l
}

// startLink starts the loops of a link to peer; s.mu is held.
func (s *Sync) startLink(peer string) *link {
	l := newLink(s, peer)
	s.wg.Add(2)
	go func() { defer s.wg.Done(); l.reportLoop() }()
	go func() { defer s.wg.Done(); l.subscribeLoop() }()
	return l
}

func (s *Sync) closeLinks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range *s.links.Load() {
		l.close()
	}
}

// reportLoads hands each link this gateway's requests in flight to the workers its peer owns.
func (s *Sync) reportLoads() {
	by := make(map[string]map[worker.ID]int64)
	for _, w := range s.cfg.Workers() {
		if w.Origin != pool.OriginMesh {
			continue
		}
		owner, _ := w.OwnerEpoch()
		if n := w.Inflight(); n != 0 && owner != "" && owner != s.cfg.NodeID {
			if by[owner] == nil {
				by[owner] = make(map[worker.ID]int64)
			}
			by[owner][w.ID] = n
		}
	}
	now := s.cfg.Now()
	for p, l := range *s.links.Load() {
		l.batch.setLoads(by[p], now, s.cfg.LoadRefresh)
	}
}
