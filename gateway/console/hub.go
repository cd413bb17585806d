package console

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// HubConfig configures a Hub.
type HubConfig struct {
	// Source is what the Hub reads. Required.
	Source Source
	// Interval is how often the Hub reads the Source while a stream is open, and so the most
	// updates a page gets per second is 1/Interval. Default 250ms.
	Interval time.Duration
	// IdleEvery: while no stream is open, the Hub reads every IdleEvery intervals, to keep the
	// recent transitions. Default 8.
	IdleEvery int
	// Budget is the share of one core the Hub's reads may take: a read that took longer than
	// Budget × Interval delays the next one until it fits (at 10,000 workers a read of the
	// admin state takes 10-15 ms, so it reads about once a second). Default 0.01.
	Budget float64
	// MaxTransitions bounds the recent transitions kept. Default 200.
	MaxTransitions int
	// Now stamps transitions. Nil means time.Now.
	Now func() time.Time
	// Logger receives the Hub's rare complaints. Nil means slog.Default().
	Logger *slog.Logger
}

// Hub reads the Source, diffs and fans changes out to the open streams (package doc, steps 2
// and 3).
type Hub struct {
	cfg HubConfig
	log *slog.Logger

	mu    sync.Mutex
	cur   *view
	v     uint64
	trans []Transition
	full  []byte // the snapshot of version v as JSON; nil when stale
	subs  map[*stream]struct{}

	reads     atomic.Uint64 // Source reads, for tests and the benchmark
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// NewHub starts a Hub; Close stops it.
func NewHub(cfg HubConfig) *Hub {
	if cfg.Interval <= 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.IdleEvery <= 0 {
		cfg.IdleEvery = 8
	}
	if cfg.MaxTransitions <= 0 {
		cfg.MaxTransitions = 200
	}
	if cfg.Budget <= 0 {
		cfg.Budget = 0.01
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Hub{cfg: cfg, log: cfg.Logger, subs: map[*stream]struct{}{}, done: make(chan struct{})}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.wg.Add(1)
	go h.loop()
	return h
}

// Close stops the Hub and ends every open stream.
func (h *Hub) Close() {
	h.closeOnce.Do(func() {
		close(h.done)
		h.wg.Wait()
	})
}

func (h *Hub) loop() {
	defer h.wg.Done()
	t := time.NewTimer(h.cfg.Interval)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-h.done:
			return
		case <-t.C:
		}
		wait := h.cfg.Interval
		if h.Streams() == 0 && n%h.cfg.IdleEvery != 0 {
			t.Reset(wait)
			continue
		}
		start := h.cfg.Now()
		h.refresh()
		// A read that costs more than Budget of the interval spaces the reads out.
		if cost := h.cfg.Now().Sub(start); cost > 0 {
			wait = max(wait, time.Duration(float64(cost)/h.cfg.Budget))
		}
		t.Reset(wait)
	}
}

// refresh reads the Source and sends the delta, if any, to every stream.
func (h *Hub) refresh() {
	st := h.cfg.Source.State()
	h.reads.Add(1)
	next := newView(st)
	now := h.cfg.Now().UTC()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil {
		// Versions start at the first read's Unix milliseconds, not at 1: a page that
		// reconnects to a restarted gateway with ?since= of the old process never matches one
		// of the new (and the number stays exact in JavaScript).
		h.cur, h.v, h.full = next, uint64(max(now.UnixMilli(), 1)), nil
		h.addTransitions(st.Recent)
		return
	}
	d := diff(h.cur, next, now)
	if d.empty() {
		h.cur = next // the same rows: nothing to send
		return
	}
	h.v++
	d.V = h.v
	h.cur, h.full = next, nil
	h.addTransitions(d.Transitions)
	b, err := json.Marshal(d)
	if err != nil {
		h.log.Error("console: cannot encode a delta", "err", err)
		return
	}
	ev := event{v: h.v, b: frame("delta", b)}
	for s := range h.subs {
		s.offer(ev)
	}
}

func (h *Hub) addTransitions(ts []Transition) {
	h.trans = append(h.trans, ts...)
	if over := len(h.trans) - h.cfg.MaxTransitions; over > 0 {
		h.trans = slices.Delete(h.trans, 0, over)
	}
}

// snapshot is the whole state as GET /ui/api/snapshot answers it and a stream's first event
// carries it.
type snapshot struct {
	V           uint64       `json:"v"`
	Node        string       `json:"node"`
	Interval    int64        `json:"interval_ms"`
	Peers       []Peer       `json:"peers"`
	Workers     []Worker     `json:"workers"`
	Journal     []Journal    `json:"journal"`
	Transitions []Transition `json:"transitions"`
}

// Snapshot returns the current state as JSON and its version, reading the Source first if the
// Hub never has.
func (h *Hub) Snapshot() ([]byte, uint64) {
	h.mu.Lock()
	empty := h.cur == nil
	h.mu.Unlock()
	if empty {
		h.refresh()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.full == nil {
		s := snapshot{V: h.v, Node: h.cur.node, Interval: h.cfg.Interval.Milliseconds(), Peers: h.cur.peers,
			Workers: h.cur.workers, Journal: h.cur.journal, Transitions: h.trans}
		if s.Peers == nil {
			s.Peers = []Peer{}
		}
		if s.Workers == nil {
			s.Workers = []Worker{}
		}
		if s.Journal == nil {
			s.Journal = []Journal{}
		}
		if s.Transitions == nil {
			s.Transitions = []Transition{}
		}
		b, err := json.Marshal(s)
		if err != nil {
			h.log.Error("console: cannot encode the snapshot", "err", err)
			return []byte("{}"), h.v
		}
		h.full = b
	}
	return h.full, h.v
}

// version is the current state's version, 0 before the first read.
func (h *Hub) version() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.v
}

// subscribe opens a stream; the caller must call unsubscribe.
func (h *Hub) subscribe() *stream {
	s := &stream{ch: make(chan event, streamQueue), kick: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *Hub) unsubscribe(s *stream) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// Streams returns the number of open streams.
func (h *Hub) Streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// streamQueue bounds the deltas queued for one stream; past it the stream is sent the whole
// state instead.
const streamQueue = 16

// event is one encoded server-sent event and the state version it brings the page to.
type event struct {
	v uint64
	b []byte
}

// stream is one open page's queue.
type stream struct {
	ch     chan event
	resync atomic.Bool
	kick   chan struct{}
}

// offer queues ev, or, when the queue is full, marks the stream for a whole snapshot.
func (s *stream) offer(ev event) {
	select {
	case s.ch <- ev:
	default:
		s.resync.Store(true)
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// frame encodes one server-sent event; data must hold no newline (encoding/json writes none).
func frame(name string, data []byte) []byte {
	b := make([]byte, 0, len(name)+len(data)+16)
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// versionHeader formats a version for the X-Console-Version header.
func versionHeader(v uint64) string { return strconv.FormatUint(v, 10) }
