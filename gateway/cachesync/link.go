package cachesync

import (
	"context"
	"errors"
	"io"
	"maps"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
	"github.com/meshgw/meshgw/ctxtime"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/prefixindex"
	"github.com/meshgw/meshgw/worker"
)

// maxModels bounds the model names a batch keeps between flushes.
const maxModels = 64

// pendingEntry is one choice's blocks in a batch: uses[from:to] of worker id, model models[model].
type pendingEntry struct {
	id       worker.ID
	model    int
	from, to int
}

// batch is what waits for one peer: the blocks of the choices of its workers, and this
// gateway's load on them. add is the request path's only touch of it.
type batch struct {
	max int

	mu      sync.Mutex
	entries []pendingEntry
	uses    []prefixindex.BlockUse
	models  []string
	loads   map[worker.ID]int64 // to send; nil: nothing to send
	due     bool

	// The peers' loop's state (setLoads) and the report loop's (take).
	sentLoads map[worker.ID]int64
	sentAt    time.Time
	spareE    []pendingEntry
	spareU    []prefixindex.BlockUse
}

// add appends a choice's blocks; false when they do not fit.
func (b *batch) add(id worker.ID, model []byte, uses []prefixindex.BlockUse) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.uses)+len(uses) > b.max {
		return false
	}
	mi := -1
	for i, m := range b.models {
		if m == string(model) {
			mi = i
			break
		}
	}
	if mi < 0 {
		if len(b.models) >= maxModels && len(b.entries) == 0 {
			b.models = b.models[:0]
		}
		b.models = append(b.models, string(model))
		mi = len(b.models) - 1
	}
	b.entries = append(b.entries, pendingEntry{id: id, model: mi, from: len(b.uses), to: len(b.uses) + len(uses)})
	b.uses = append(b.uses, uses...)
	return true
}

// setLoads notes this gateway's load on the peer's workers, to send when it changed or when
// refresh passed since the last send while it is not zero.
func (b *batch) setLoads(loads map[worker.ID]int64, now time.Time, refresh time.Duration) {
	if maps.Equal(loads, b.sentLoads) && (len(loads) == 0 || now.Sub(b.sentAt) < refresh) {
		return
	}
	b.sentLoads, b.sentAt = loads, now
	if loads == nil {
		loads = map[worker.ID]int64{}
	}
	b.mu.Lock()
	b.loads, b.due = loads, true
	b.mu.Unlock()
}

// take returns the report to send, nil when there is nothing.
func (b *batch) take(from string) (*meshv1.CacheReport, int) {
	b.mu.Lock()
	entries, uses, models, loads, due := b.entries, b.uses, b.models, b.loads, b.due
	b.entries, b.uses, b.loads, b.due = b.spareE[:0], b.spareU[:0], nil, false
	if len(models) > maxModels {
		b.models = nil
	}
	b.mu.Unlock()
	defer func() { b.spareE, b.spareU = entries[:0], uses[:0] }()
	if len(entries) == 0 && !due {
		return nil, 0
	}
	m := &meshv1.CacheReport{From: from}
	type key struct {
		id    worker.ID
		model int
	}
	merged := make(map[key][]prefixindex.BlockUse)
	var order []key
	for _, e := range entries {
		k := key{e.id, e.model}
		if _, ok := merged[k]; !ok {
			order = append(order, k)
		}
		merged[k] = append(merged[k], uses[e.from:e.to]...)
	}
	for _, k := range order {
		enc, _ := prefixindex.Delta{Used: merged[k]}.AppendBinary(nil)
		m.Entries = append(m.Entries, &meshv1.CacheEntry{WorkerId: string(k.id), Model: models[k.model], Delta: enc})
	}
	if due {
		m.Loads = encodeLoads(loads)
	}
	return m, len(uses)
}

func encodeLoads(loads map[worker.ID]int64) *meshv1.CacheLoads {
	l := &meshv1.CacheLoads{Workers: make([]*meshv1.WorkerLoad, 0, len(loads))}
	for id, n := range loads {
		l.Workers = append(l.Workers, &meshv1.WorkerLoad{WorkerId: string(id), InFlight: n})
	}
	return l
}

// link is this gateway's two streams with one peer: its reports to the peer as owner, and its
// subscription to the peer's publications.
type link struct {
	s     *Sync
	peer  string
	batch batch
	ctx   context.Context
	stop  context.CancelFunc
}

func newLink(s *Sync, peer string) *link {
	l := &link{s: s, peer: peer, batch: batch{max: s.cfg.MaxPendingBlocks}}
	l.ctx, l.stop = context.WithCancel(s.life)
	return l
}

func (l *link) close() { l.stop() }

// dial returns a connection to the peer, nil when its address is not known.
func (l *link) dial() *grpc.ClientConn {
	addr, ok := l.s.cfg.Resolve(l.peer)
	if !ok {
		return nil
	}
	conn, err := grpc.NewClient(addr, l.s.cfg.DialOptions...)
	if err != nil {
		return nil
	}
	return conn
}

// wait sleeps d or until the link closes; false when it closed.
func (l *link) wait(d time.Duration) bool { return ctxtime.Sleep(l.ctx, d) == nil }

func nextBackoff(b, lo time.Duration) time.Duration { return min(max(2*b, lo), 2*time.Second) }

// reportLoop sends the batch every FlushInterval over one client stream, opened again after a
// backoff when it fails; what cannot be sent is dropped and counted.
func (l *link) reportLoop() {
	cfg := &l.s.cfg
	t := time.NewTicker(cfg.FlushInterval)
	defer t.Stop()
	var conn *grpc.ClientConn
	var stream meshv1.CacheSync_ReportClient
	var backoff time.Duration
	var retryAt time.Time
	defer func() {
		if stream != nil {
			_ = stream.CloseSend()
		}
		if conn != nil {
			_ = conn.Close()
		}
	}()
	fail := func() {
		stream = nil
		if conn != nil {
			_ = conn.Close()
			conn = nil
		}
		backoff = nextBackoff(backoff, 5*cfg.FlushInterval)
		retryAt = time.Now().Add(backoff)
	}
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		m, blocks := l.batch.take(cfg.NodeID)
		if m == nil {
			continue
		}
		if stream == nil && time.Now().After(retryAt) {
			if conn = l.dial(); conn != nil {
				s, err := meshv1.NewCacheSyncClient(conn).Report(l.ctx)
				if err == nil {
					stream, backoff = s, 0
				}
			}
			if stream == nil {
				fail()
			}
		}
		if stream == nil {
			l.s.stats.Dropped.Add(int64(blocks))
			continue
		}
		if err := stream.Send(m); err != nil {
			l.s.stats.Dropped.Add(int64(blocks))
			fail()
			continue
		}
		l.s.stats.ReportBytes.Add(int64(proto.Size(m)))
		l.s.stats.ReportBlocks.Add(int64(blocks))
	}
}

// subscribeLoop keeps a subscription to the peer and applies what it publishes; a broken one
// is opened again after a backoff, and the peer's published loads are zero meanwhile.
func (l *link) subscribeLoop() {
	var backoff time.Duration
	for {
		err := l.subscribe()
		if l.ctx.Err() != nil {
			return
		}
		if err != nil {
			l.s.log.Debug("cache subscription ended", "peer", l.peer, "err", err)
		}
		backoff = nextBackoff(backoff, 5*l.s.cfg.FlushInterval)
		if !l.wait(backoff) {
			return
		}
	}
}

// subscribe runs one subscription until it fails or the link closes.
func (l *link) subscribe() error {
	conn := l.dial()
	if conn == nil {
		return errors.New("the peer's gRPC address is not known")
	}
	defer conn.Close()
	stream, err := meshv1.NewCacheSyncClient(conn).Subscribe(l.ctx, &meshv1.CacheSubscribe{From: l.s.cfg.NodeID})
	if err != nil {
		return err
	}
	published := map[worker.ID]bool{}
	defer func() {
		for id := range published {
			l.s.loads.set(pool.HashString(string(id)), 0)
		}
	}()
	for {
		u, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n, _ := l.s.applyEntries(u.GetEntries(), nil)
		l.s.stats.AppliedBlocks.Add(int64(n))
		if ls := u.GetLoads(); ls != nil {
			seen := make(map[worker.ID]bool, len(ls.GetWorkers()))
			for _, w := range ls.GetWorkers() {
				id := worker.ID(w.GetWorkerId())
				seen[id] = true
				l.s.loads.set(pool.HashString(string(id)), max(0, w.GetInFlight()))
			}
			for id := range published {
				if !seen[id] {
					l.s.loads.set(pool.HashString(string(id)), 0)
				}
			}
			published = seen
		}
	}
}

// applyEntries merges entries into the index; with keep, only those of workers keep accepts,
// which are then queued for publication. It returns the blocks applied and the entries refused.
func (s *Sync) applyEntries(entries []*meshv1.CacheEntry, keep func(worker.ID) bool) (n, refused int) {
	for _, e := range entries {
		id := worker.ID(e.GetWorkerId())
		var d prefixindex.Delta
		if id == "" || keep != nil && !keep(id) || d.UnmarshalBinary(e.GetDelta()) != nil {
			refused++
			continue
		}
		s.cfg.Index.Model([]byte(e.GetModel())).Apply(prefixindex.Worker(pool.HashString(string(id))), d)
		n += len(d.Used) + len(d.Evicted)
		if keep != nil {
			s.pub.add(id, []byte(e.GetModel()), d.Used, d.Evicted)
		}
	}
	s.stats.Dropped.Add(int64(refused))
	return n, refused
}
