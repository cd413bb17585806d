package cachesync

import (
	"errors"
	"io"
	"maps"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/prefixindex"
	"github.com/meshgw/meshgw/worker"
)

// subscriberQueue is how many publications wait for one subscriber before it is cut off.
const subscriberQueue = 256

// snapshotBytes is about the most one first message of a subscription carries.
const snapshotBytes = 512 << 10

// pubKey names one entry: a worker's, in one model's index.
type pubKey struct {
	id    worker.ID
	model string
}

// subscriber is one peer's subscription to this gateway's publications.
type subscriber struct {
	from string
	ch   chan *meshv1.CacheUpdate
	cut  chan struct{} // closed when it is cut off

	// The publisher's state.
	sentLoads map[worker.ID]int64
	sentAt    time.Time
}

// publisher gathers what changed in the entries of the workers this gateway owns and sends it,
// with their loads, to every subscriber every FlushInterval.
type publisher struct {
	s *Sync

	mu      sync.Mutex
	pending map[pubKey]*prefixindex.Delta
	blocks  int
	subs    map[*subscriber]struct{}
}

func newPublisher(s *Sync) *publisher {
	return &publisher{s: s, pending: make(map[pubKey]*prefixindex.Delta), subs: make(map[*subscriber]struct{})}
}

// add queues blocks used and evicted in an owned worker's entry; what passes MaxPendingBlocks is
// dropped and counted (subscribers then miss it until they subscribe again).
func (p *publisher) add(id worker.ID, model []byte, used, evicted []prefixindex.BlockUse) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.subs) == 0 {
		return
	}
	if p.blocks+len(used)+len(evicted) > p.s.cfg.MaxPendingBlocks {
		p.s.stats.Dropped.Add(int64(len(used) + len(evicted)))
		return
	}
	k := pubKey{id, string(model)}
	d := p.pending[k]
	if d == nil {
		d = &prefixindex.Delta{}
		p.pending[k] = d
	}
	d.Used = append(d.Used, used...)
	d.Evicted = append(d.Evicted, evicted...)
	p.blocks += len(used) + len(evicted)
}

func (p *publisher) run(life interface{ Done() <-chan struct{} }) {
	t := time.NewTicker(p.s.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-life.Done():
			return
		case <-t.C:
			p.flush()
		}
	}
}

// flush sends what changed, and the loads that changed, to every subscriber; it also sets this
// gateway's own published load of each owned worker (the other gateways' reports).
func (p *publisher) flush() {
	s := p.s
	now := s.cfg.Now()
	p.mu.Lock()
	pending, blocks := p.pending, p.blocks
	p.pending, p.blocks = make(map[pubKey]*prefixindex.Delta, len(pending)), 0
	subs := make([]*subscriber, 0, len(p.subs))
	for sub := range p.subs {
		subs = append(subs, sub)
	}
	p.mu.Unlock()

	entries := make([]*meshv1.CacheEntry, 0, len(pending))
	for k, d := range pending {
		enc, _ := d.AppendBinary(nil)
		entries = append(entries, &meshv1.CacheEntry{WorkerId: string(k.id), Model: k.model, Delta: enc})
	}
	total, by := s.owned.sums(now)
	own := make(map[worker.ID]int64)
	for _, w := range s.cfg.Workers() {
		if !s.cfg.Owns(w.ID) {
			continue
		}
		own[w.ID] = w.Inflight()
		s.loads.set(w.Hash, total[w.ID])
	}
	for _, sub := range subs {
		loads := make(map[worker.ID]int64, len(own))
		for id, n := range own {
			if n += total[id] - by[sub.from][id]; n > 0 {
				loads[id] = n
			}
		}
		u := &meshv1.CacheUpdate{Owner: s.cfg.NodeID, Entries: entries}
		if !maps.Equal(loads, sub.sentLoads) || len(loads) > 0 && now.Sub(sub.sentAt) >= s.cfg.LoadRefresh {
			u.Loads = encodeLoads(loads)
			sub.sentLoads, sub.sentAt = loads, now
		}
		if len(entries) == 0 && u.Loads == nil {
			continue
		}
		select {
		case sub.ch <- u:
			s.stats.UpdateBytes.Add(int64(proto.Size(u)))
			s.stats.UpdateBlocks.Add(int64(blocks))
		default:
			p.cutOff(sub)
		}
	}
}

func (p *publisher) subscribe(from string) *subscriber {
	sub := &subscriber{from: from, ch: make(chan *meshv1.CacheUpdate, subscriberQueue), cut: make(chan struct{})}
	p.mu.Lock()
	p.subs[sub] = struct{}{}
	p.mu.Unlock()
	return sub
}

func (p *publisher) unsubscribe(sub *subscriber) {
	p.mu.Lock()
	delete(p.subs, sub)
	p.mu.Unlock()
}

// cutOff ends a subscriber too slow to take the publications.
func (p *publisher) cutOff(sub *subscriber) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.subs[sub]; ok {
		delete(p.subs, sub)
		close(sub.cut)
		p.s.stats.CutOff.Add(1)
	}
}

// errCutOff ends a subscription whose subscriber fell behind.
var errCutOff = errors.New("cachesync: the subscriber fell behind; subscribe again")

// Subscribe implements meshv1.CacheSyncServer: the whole entries of the workers this gateway
// owns, then what the publisher sends, until the subscriber goes or falls behind.
func (s *Sync) Subscribe(req *meshv1.CacheSubscribe, stream meshv1.CacheSync_SubscribeServer) error {
	sub := s.pub.subscribe(req.GetFrom())
	defer s.pub.unsubscribe(sub)
	for _, u := range s.snapshot() {
		if err := stream.Send(u); err != nil {
			return err
		}
		s.stats.UpdateBytes.Add(int64(proto.Size(u)))
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-s.life.Done():
			return nil
		case <-sub.cut:
			return errCutOff
		case u := <-sub.ch:
			if err := stream.Send(u); err != nil {
				return err
			}
		}
	}
}

// snapshot is the whole entries of every worker this gateway owns, in messages of about
// snapshotBytes.
func (s *Sync) snapshot() []*meshv1.CacheUpdate {
	var owned []*pool.Worker
	for _, w := range s.cfg.Workers() {
		if s.cfg.Owns(w.ID) {
			owned = append(owned, w)
		}
	}
	var out []*meshv1.CacheUpdate
	u, size := &meshv1.CacheUpdate{Owner: s.cfg.NodeID}, 0
	for _, name := range s.cfg.Index.Models() {
		m := s.cfg.Index.Model([]byte(name))
		for _, w := range owned {
			d := m.Snapshot(prefixindex.Worker(w.Hash))
			for len(d.Used) > 0 {
				part := d.Used[:min(len(d.Used), snapshotBytes/10)]
				d.Used = d.Used[len(part):]
				enc, _ := prefixindex.Delta{Used: part}.AppendBinary(nil)
				u.Entries = append(u.Entries, &meshv1.CacheEntry{WorkerId: string(w.ID), Model: name, Delta: enc})
				if size += len(enc); size >= snapshotBytes {
					out = append(out, u)
					u, size = &meshv1.CacheUpdate{Owner: s.cfg.NodeID}, 0
				}
			}
		}
	}
	if len(u.Entries) > 0 {
		out = append(out, u)
	}
	return out
}

// Report implements meshv1.CacheSyncServer: each report's entries of workers this gateway owns
// go to its index and its publication, the others are dropped; its loads replace the
// reporter's.
func (s *Sync) Report(stream meshv1.CacheSync_ReportServer) error {
	msgs := make(chan *meshv1.CacheReport)
	recvErr := make(chan error, 1)
	go func() { // Recv in its own goroutine, so that Close ends a stream waiting for a report
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-stream.Context().Done():
				return
			}
		}
	}()
	var ack meshv1.CacheReportAck
	for {
		select {
		case <-s.life.Done():
			return stream.SendAndClose(&ack)
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return stream.SendAndClose(&ack)
			}
			return err
		case m := <-msgs:
			s.takeReport(m, &ack)
		}
	}
}

// takeReport applies one report and counts its entries in ack.
func (s *Sync) takeReport(m *meshv1.CacheReport, ack *meshv1.CacheReportAck) {
	_, bad := s.applyEntries(m.GetEntries(), s.cfg.Owns)
	ack.Rejected += uint64(bad)
	ack.Accepted += uint64(len(m.GetEntries()) - bad)
	if ls := m.GetLoads(); ls != nil && m.GetFrom() != "" {
		loads := make(map[worker.ID]int64, len(ls.GetWorkers()))
		for _, w := range ls.GetWorkers() {
			if id := worker.ID(w.GetWorkerId()); s.cfg.Owns(id) && w.GetInFlight() > 0 {
				loads[id] = w.GetInFlight()
			}
		}
		s.owned.report(m.GetFrom(), loads, s.cfg.Now())
	}
}
