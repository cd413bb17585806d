// Package cachesyncbench measures cachesync's fleet-wide prefix index: how long a prompt routed
// through one gateway takes to be known to every gateway, and the bytes of reports and
// publications that carries. Gateways run in one process, each with its own index, pool and
// gRPC server on 127.0.0.1, and talk over real gRPC. BenchmarkPropagation in
// gateway/cachesync and the cachesync section of make bench (bench/cachesync.go) call
// Propagation.
package cachesyncbench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/meshgw/meshgw/gateway/cachesync"
	"github.com/meshgw/meshgw/gateway/policy"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/prefixindex"
	"github.com/meshgw/meshgw/worker"
)

// Options configure Propagation. Zero fields take the defaults in their comments.
type Options struct {
	// Gateways is how many gateways run (5).
	Gateways int
	// Workers is how many workers every gateway knows (4); the first Owners gateways (2) own
	// them in turn, so the others report every turn they route and the owners publish it.
	Workers, Owners int
	// Sessions is how many chats the turns go round (16).
	Sessions int
	// Requests is how many turns are routed and timed (400).
	Requests int
	// TurnBound is how long one turn, or the warm-up, may take to reach every gateway before
	// Propagation gives up (5 s).
	TurnBound time.Duration
	// Poll is the pause between two looks at the gateways' indexes while a turn spreads
	// (200 µs).
	Poll time.Duration
}

func (o *Options) setDefaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Gateways, 5)
	def(&o.Workers, 4)
	def(&o.Owners, 2)
	def(&o.Sessions, 16)
	def(&o.Requests, 400)
	o.Owners = min(o.Owners, o.Gateways)
	if o.TurnBound <= 0 {
		o.TurnBound = 5 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 200 * time.Microsecond
	}
}

// Result is what Propagation measured.
type Result struct {
	Gateways int `json:"gateways"`
	Workers  int `json:"workers"`
	Owners   int `json:"owners"`
	Sessions int `json:"sessions"`
	Requests int `json:"requests"`
	// PromptMinBytes, PromptMeanBytes and PromptMaxBytes describe the timed turns' prompts.
	PromptMinBytes  int     `json:"prompt_min_bytes"`
	PromptMeanBytes float64 `json:"prompt_mean_bytes"`
	PromptMaxBytes  int     `json:"prompt_max_bytes"`
	// WarmUpMs is how long the warm-up took: from the gateways' start until every gateway knew
	// a turn routed through each gateway to each worker, so that every subscription and every
	// report stream the timed turns use is open.
	WarmUpMs float64 `json:"warm_up_ms"`
	// P50Ms, P99Ms and MaxMs are the timed turns' propagation: from routing the turn until the
	// last gateway's index matches its whole prompt on its worker. P99Ms is the
	// (Requests×99/100)-th fastest, counted from 0.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// ReportBytes and ReportBlocks are what the gateways sent owners during the timed turns
	// (encoded messages, and blocks); PublishBytes and PublishBlocks what the owners sent
	// their subscribers. Dropped are blocks never sent or refused (cachesync.Stats).
	ReportBytes   int64 `json:"report_bytes"`
	ReportBlocks  int64 `json:"report_blocks"`
	PublishBytes  int64 `json:"publish_bytes"`
	PublishBlocks int64 `json:"publish_blocks"`
	Dropped       int64 `json:"dropped_blocks"`
	// ReportBytesPerReq and PublishBytesPerReq are those bytes divided by Requests.
	ReportBytesPerReq  float64 `json:"report_bytes_per_request"`
	PublishBytesPerReq float64 `json:"publish_bytes_per_request"`
}

// Prompt is turn i's routing text: a system prompt of about 6.9 KB and the session's number
// (session i mod sessions), then each of the session's earlier turns, then a new one. 400
// turns over 16 sessions make prompts of about 7 to 9 KB; each shares all but the last turn
// of its session's previous prompt, whose last turn it rewrites, and adds about 80 bytes.
func Prompt(i, sessions int) string {
	session := i % sessions
	var b strings.Builder
	b.WriteString(systemPrompt)
	fmt.Fprintf(&b, " session %d ", session)
	for k := 0; k < i/sessions; k++ {
		fmt.Fprintf(&b, " turn %d of %d: %s", k, session, strings.Repeat("words ", 10))
	}
	fmt.Fprintf(&b, " turn %d of %d: %s", i/sessions, session, strings.Repeat("new words ", 10))
	return b.String()
}

var systemPrompt = "You are a careful assistant. " + strings.Repeat("Answer in plain words. ", 300)

// Propagation starts o.Gateways gateways on 127.0.0.1, waits until every stream between them
// that the turns use is open (bounded by o.TurnBound), then routes o.Requests turns of multi-
// turn chats (Prompt) through the gateways in turn, one at a time, turn i to worker
// (i mod Sessions) mod Workers, and times each until every gateway knows its whole prompt on
// its worker. It stops every gateway before it returns. It fails when a turn or the warm-up
// exceeds o.TurnBound, or when ctx ends.
func Propagation(ctx context.Context, o Options) (Result, error) {
	o.setDefaults()
	f, err := startFleet(o)
	defer f.close()
	if err != nil {
		return Result{}, err
	}
	res := Result{Gateways: o.Gateways, Workers: o.Workers, Owners: o.Owners, Sessions: o.Sessions, Requests: o.Requests,
		PromptMinBytes: -1}
	start := time.Now()
	if err := f.warmUp(ctx, o); err != nil {
		return res, err
	}
	res.WarmUpMs = ms(time.Since(start))
	before := f.stats()
	lat := make([]time.Duration, 0, o.Requests)
	var promptBytes int
	var b prefixindex.Blocks
	for i := range o.Requests {
		text := Prompt(i, o.Sessions)
		if res.PromptMinBytes < 0 || len(text) < res.PromptMinBytes {
			res.PromptMinBytes = len(text)
		}
		res.PromptMaxBytes = max(res.PromptMaxBytes, len(text))
		promptBytes += len(text)
		w := (i % o.Sessions) % o.Workers
		b.SetText([]byte(text))
		start := time.Now()
		f.route(f.nodes[i%o.Gateways], w, &b, start)
		if err := f.waitKnown(ctx, o, w, &b, len(text), start); err != nil {
			return res, fmt.Errorf("turn %d: %w", i, err)
		}
		lat = append(lat, time.Since(start))
	}
	after := f.stats()
	res.ReportBytes, res.ReportBlocks = after.report-before.report, after.reportBlocks-before.reportBlocks
	res.PublishBytes, res.PublishBlocks = after.publish-before.publish, after.publishBlocks-before.publishBlocks
	res.Dropped = after.dropped - before.dropped
	res.PromptMeanBytes = float64(promptBytes) / float64(o.Requests)
	res.ReportBytesPerReq = float64(res.ReportBytes) / float64(o.Requests)
	res.PublishBytesPerReq = float64(res.PublishBytes) / float64(o.Requests)
	slices.Sort(lat)
	res.P50Ms, res.P99Ms, res.MaxMs = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1])
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// fleet is the gateways of one Propagation run; every one knows every worker, owned by the
// same gateway on every one.
type fleet struct {
	specs  []worker.Spec
	hashes []prefixindex.Worker // of specs, as the indexes key them
	owner  map[worker.ID]string
	addrs  map[string]string // node id → gRPC address
	nodes  []*node
}

type node struct {
	id   string
	sync *cachesync.Sync
	idx  *prefixindex.Index
	pool *pool.Pool
	srv  *grpc.Server
}

// startFleet starts every gateway's gRPC server, then every gateway's Sync. The fleet it returns
// must be closed, also on error.
func startFleet(o Options) (*fleet, error) {
	f := &fleet{owner: map[worker.ID]string{}, addrs: map[string]string{}}
	ids := make([]string, o.Gateways)
	for g := range ids {
		ids[g] = "gw" + strconv.Itoa(g+1)
	}
	for i := range o.Workers {
		s := worker.Spec{URL: "http://127.0.0.1:" + strconv.Itoa(10001+i)} // never contacted
		f.specs = append(f.specs, s)
		f.hashes = append(f.hashes, prefixindex.Worker(pool.HashString(string(s.ID()))))
		f.owner[s.ID()] = ids[i%o.Owners]
	}
	var lns []net.Listener
	for _, id := range ids {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, ln := range lns {
				ln.Close()
			}
			return f, err
		}
		lns = append(lns, ln)
		f.addrs[id] = ln.Addr().String()
	}
	for g, id := range ids {
		n, err := f.newNode(id, ids)
		if err != nil {
			for _, ln := range lns[g:] {
				ln.Close()
			}
			return f, err
		}
		f.nodes = append(f.nodes, n)
		go func(ln net.Listener) { _ = n.srv.Serve(ln) }(lns[g])
	}
	for _, n := range f.nodes {
		n.sync.Start()
	}
	return f, nil
}

// newNode returns gateway id, its Sync not started; peers are every gateway's id.
func (f *fleet) newNode(id string, peers []string) (*node, error) {
	p := pool.New(pool.Config{})
	for _, s := range f.specs {
		if _, _, err := p.Upsert(s, pool.OriginMesh); err != nil {
			return nil, err
		}
		if err := p.SetOwner(s.ID(), f.owner[s.ID()], 1); err != nil {
			return nil, err
		}
	}
	n := &node{id: id, pool: p}
	n.idx = prefixindex.New(prefixindex.Config{EvictionInterval: -1,
		OnEvict: func(m string, w prefixindex.Worker, gone []prefixindex.BlockUse) { n.sync.Evicted(m, w, gone) }})
	others := slices.DeleteFunc(slices.Clone(peers), func(p string) bool { return p == id })
	s, err := cachesync.New(cachesync.Config{NodeID: id, Index: n.idx,
		Workers: func() []*pool.Worker { return p.Snapshot().All },
		Owns:    func(w worker.ID) bool { return f.owner[w] == id },
		Peers:   func() []string { return others },
		Resolve: func(node string) (string, bool) { a, ok := f.addrs[node]; return a, ok },
		Logger:  slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	n.sync = s
	n.srv = grpc.NewServer()
	s.Register(n.srv)
	return n, nil
}

// close stops every Sync, then every server.
func (f *fleet) close() {
	for _, n := range f.nodes {
		n.sync.Close()
	}
	for _, n := range f.nodes {
		n.srv.Stop()
	}
}

// route makes gateway n choose worker i for the text b, as cache_aware does: its own index
// first, then what the choice added to the worker's entry to cachesync.
func (f *fleet) route(n *node, i int, b *prefixindex.Blocks, now time.Time) {
	w := n.pool.Get(f.specs[i].ID())
	uses := n.idx.Model(nil).InsertReport(prefixindex.Worker(w.Hash), b, now, policy.RefreshAfter, nil)
	if len(uses) > 0 {
		n.sync.Routed(w, nil, uses)
	}
}

// knows reports whether gateway n's index matches the first length bytes of the text b on
// worker i: the whole text when length is its length.
func (f *fleet) knows(n *node, i int, b *prefixindex.Blocks, length int) bool {
	var out [1]prefixindex.Match
	n.idx.Model(nil).Lookup(b, f.hashes[i:i+1], out[:])
	return out[0].Len == length
}

// waitKnown polls every gateway until each knows the text b on worker i, o.TurnBound after
// start at most.
func (f *fleet) waitKnown(ctx context.Context, o Options, i int, b *prefixindex.Blocks, length int, start time.Time) error {
	for _, n := range f.nodes {
		for !f.knows(n, i, b, length) {
			if time.Since(start) > o.TurnBound {
				return fmt.Errorf("%s did not know it within %s", n.id, o.TurnBound)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			time.Sleep(o.Poll)
		}
	}
	return nil
}

// warmUp routes a short turn through each gateway to each worker and waits until every gateway
// knows them all: every subscription to an owner is then open, and every report stream to an
// owner, which a gateway opens with its first report. A turn not known 250 ms after it was
// routed is routed again as a new text, in case its report was dropped while a stream opened.
// It fails o.TurnBound after it started.
func (f *fleet) warmUp(ctx context.Context, o Options) error {
	start := time.Now()
	type turn struct {
		g, w int
		b    *prefixindex.Blocks
		n    int // text length
		at   time.Time
	}
	var pending []*turn
	for g := range f.nodes {
		for w := range f.specs {
			pending = append(pending, &turn{g: g, w: w})
		}
	}
	for attempt := 0; ; attempt++ {
		now := time.Now()
		for _, t := range pending {
			if t.b == nil || now.Sub(t.at) > 250*time.Millisecond {
				text := fmt.Sprintf("warm-up through %s to worker %d, attempt %d", f.nodes[t.g].id, t.w, attempt)
				t.b, t.n, t.at = &prefixindex.Blocks{}, len(text), now
				t.b.SetText([]byte(text))
				f.route(f.nodes[t.g], t.w, t.b, now)
			}
		}
		pending = slices.DeleteFunc(pending, func(t *turn) bool {
			for _, n := range f.nodes {
				if !f.knows(n, t.w, t.b, t.n) {
					return false
				}
			}
			return true
		})
		if len(pending) == 0 {
			return nil
		}
		if time.Since(start) > o.TurnBound {
			return fmt.Errorf("warm-up: %d of %d turns not known to every gateway within %s", len(pending), len(f.nodes)*len(f.specs), o.TurnBound)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// counters are cachesync.Stats summed over the gateways.
type counters struct{ report, reportBlocks, publish, publishBlocks, dropped int64 }

// stats sums every gateway's counters.
func (f *fleet) stats() counters {
	var c counters
	for _, n := range f.nodes {
		s := n.sync.Stats()
		c.report += s.ReportBytes.Load()
		c.reportBlocks += s.ReportBlocks.Load()
		c.publish += s.UpdateBytes.Load()
		c.publishBlocks += s.UpdateBlocks.Load()
		c.dropped += s.Dropped.Load()
	}
	return c
}
