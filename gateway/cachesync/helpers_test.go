package cachesync

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/prefixindex"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// fleet is gateways on 127.0.0.1 that know the same workers, whose owner a test sets.
type fleet struct {
	t     testing.TB
	mu    sync.Mutex
	addrs map[string]string
	alive map[string]bool
	owner map[worker.ID]*atomic.Pointer[string]
	nodes map[string]*node
	specs []worker.Spec
	// maxChars bounds the gateways' indexes (0: the default).
	maxChars int64
}

type node struct {
	id   string
	sync *Sync
	idx  *prefixindex.Index
	pool *pool.Pool
	srv  *grpc.Server
}

func newFleet(t testing.TB, workers int) *fleet {
	f := &fleet{t: t, addrs: map[string]string{}, alive: map[string]bool{}, owner: map[worker.ID]*atomic.Pointer[string]{},
		nodes: map[string]*node{}}
	for i := range workers {
		s := worker.Spec{URL: "http://127.0.0.1:" + string(rune('1'+i)) + "0001"}
		f.specs = append(f.specs, s)
		f.owner[s.ID()] = &atomic.Pointer[string]{}
	}
	return f
}

// own makes node the owner of worker i, on every gateway.
func (f *fleet) own(i int, node string) {
	id := f.specs[i].ID()
	f.owner[id].Store(&node)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.nodes {
		_ = n.pool.SetOwner(id, node, 1)
	}
}

func (f *fleet) worker(node string, i int) *pool.Worker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[node].pool.Get(f.specs[i].ID())
}

// start runs a gateway called id.
func (f *fleet) start(id string) *node {
	f.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	p := pool.New(pool.Config{})
	for _, s := range f.specs {
		if _, _, err := p.Upsert(s, pool.OriginMesh); err != nil {
			f.t.Fatal(err)
		}
		if o := f.owner[s.ID()].Load(); o != nil {
			_ = p.SetOwner(s.ID(), *o, 1)
		}
	}
	n := &node{id: id, pool: p}
	n.idx = prefixindex.New(prefixindex.Config{MaxChars: f.maxChars, EvictionInterval: -1, OnEvict: func(m string, w prefixindex.Worker, gone []prefixindex.BlockUse) {
		n.sync.Evicted(m, w, gone)
	}})
	s, err := New(Config{NodeID: id, Index: n.idx, Workers: func() []*pool.Worker { return p.Snapshot().All },
		Owns: func(w worker.ID) bool { o := f.owner[w].Load(); return o != nil && *o == id },
		Peers: func() []string {
			f.mu.Lock()
			defer f.mu.Unlock()
			var ps []string
			for p, ok := range f.alive {
				if ok && p != id {
					ps = append(ps, p)
				}
			}
			return ps
		},
		Resolve: func(node string) (string, bool) {
			f.mu.Lock()
			defer f.mu.Unlock()
			a, ok := f.addrs[node]
			return a, ok
		},
		Logger: testkit.Quiet()})
	if err != nil {
		f.t.Fatal(err)
	}
	n.sync = s
	n.srv = grpc.NewServer()
	s.Register(n.srv)
	go func() { _ = n.srv.Serve(ln) }()
	f.mu.Lock()
	f.addrs[id], f.alive[id], f.nodes[id] = ln.Addr().String(), true, n
	f.mu.Unlock()
	s.Start()
	f.t.Cleanup(func() { f.stop(id) })
	return n
}

// stop ends a gateway, as a killed one: its peers see it gone.
func (f *fleet) stop(id string) {
	f.mu.Lock()
	n := f.nodes[id]
	delete(f.nodes, id)
	f.alive[id] = false
	f.mu.Unlock()
	if n == nil {
		return
	}
	n.sync.Close()
	n.srv.Stop()
}

// route makes gateway n choose worker i for text, as cache_aware does.
func (f *fleet) route(n *node, i int, text string, now time.Time) {
	var b prefixindex.Blocks
	b.SetText([]byte(text))
	w := f.worker(n.id, i)
	uses := n.idx.Model(nil).InsertReport(prefixindex.Worker(w.Hash), &b, now, time.Second, nil)
	if len(uses) > 0 {
		n.sync.Routed(w, nil, uses)
	}
}

// knows reports whether gateway n's index matches the whole text on worker i.
func (f *fleet) knows(n *node, i int, text string) bool {
	var b prefixindex.Blocks
	b.SetText([]byte(text))
	out := make([]prefixindex.Match, 1)
	n.idx.Model(nil).Lookup(&b, []prefixindex.Worker{prefixindex.Worker(pool.HashString(string(f.specs[i].ID())))}, out)
	return out[0].Len == len(text)
}
