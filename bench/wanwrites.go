package bench

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// WANWrites are fleet-acknowledged flag writes through one gateway.
type WANWrites struct {
	Through string `json:"through"`
	// Leader says whether the gateway held the raft leadership (else each write is forwarded).
	Leader bool `json:"leader"`
	// Disables timed in the quiet half, their p50, p99 and max; the enables after them, for
	// scale; the disables of the loaded half.
	Writes       int     `json:"writes"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`
	EnableP50Ms  float64 `json:"enable_p50_ms"`
	EnableP99Ms  float64 `json:"enable_p99_ms"`
	LoadedWrites int     `json:"loaded_writes"`
	LoadedP50Ms  float64 `json:"loaded_p50_ms"`
	LoadedP99Ms  float64 `json:"loaded_p99_ms"`
	LoadedMaxMs  float64 `json:"loaded_max_ms"`
	// Slowest are the quiet half's 5 longest disables, in ms, longest first: whether the tail
	// comes in steps of the links' one-way delay (an extra hop) or spread (scheduling).
	// SlowestCommitMs is, for each, the upper bound of the leader's
	// meshgw_raft_apply_duration_seconds bucket its commit fell in (append, commit and apply on
	// the leader; -1: not seen): whether the time went to raft or to the acknowledgement after.
	Slowest         []float64 `json:"slowest_ms"`
	SlowestCommitMs []float64 `json:"slowest_commit_le_ms"`
	// OverTarget and LoadedOverTarget count the disables over goalWANFleetAckP99Ms.
	OverTarget       int `json:"over_target"`
	LoadedOverTarget int `json:"loaded_over_target"`
	NotAllAcked      int `json:"not_all_acked"`
	// Probes are the chats sent one at a time through every gateway after each disable of the
	// quiet half returned; ReachedAfter counts those the worker took (answered 200, or its own
	// request counter moved).
	Probes       int `json:"probes"`
	ReachedAfter int `json:"reached_after"`
	// ProbeStatus counts the probes' answers by status.
	ProbeStatus map[int]int `json:"probe_status"`
	// The loaded half: chats for the pinned model sent through every gateway all along; of them,
	// LoadAfter were sent after a disable returned and before the next enable was sent, and
	// LoadReachedAfter of those were answered 200 (by the only worker serving the model).
	LoadChats        int         `json:"load_chats"`
	LoadAfter        int         `json:"load_after"`
	LoadReachedAfter int         `json:"load_reached_after"`
	LoadStatus       map[int]int `json:"load_status"`
}

// engineRequests reads the model requests the engine at u has answered (GET /_stats), from
// region r.
func (f *wanFleet) engineRequests(ctx context.Context, r int, u string) (int64, error) {
	var st engineStats
	err := getJSON(ctx, f.gws[r].client, u+"/_stats", &st)
	return st.Requests, err
}

// wanWrites times twice w.Writes fleet-acknowledged disables of the pinned worker (in region pr)
// through g, each followed by an enable. In the quiet half, after each disable returned, one
// chat for the pinned model goes through every gateway in turn, and none may reach the worker.
// In the loaded half, chats for the pinned model go through every gateway all along, the worker
// stays disabled wanLoadDwell after each disable returned, and no chat sent meanwhile may be
// answered by the worker.
func wanWrites(ctx context.Context, f *wanFleet, w *WANOptions, g, lg *wanGW, pr int, pinned string) (*WANWrites, error) {
	res := &WANWrites{Through: g.id, Leader: g == lg, ProbeStatus: map[int]int{}, LoadStatus: map[int]int{}}
	var dis, loaded, en []time.Duration
	var quiet []quietWrite
	defer func() {
		res.Writes, res.LoadedWrites = len(dis), len(loaded)
		res.P50Ms, res.P99Ms, res.MaxMs = quantiles(dis)
		res.LoadedP50Ms, res.LoadedP99Ms, res.LoadedMaxMs = quantiles(loaded)
		res.EnableP50Ms, res.EnableP99Ms, _ = quantiles(en)
		res.OverTarget, res.LoadedOverTarget = over(dis, goalWANFleetAckP99Ms), over(loaded, goalWANFleetAckP99Ms)
		for _, q := range slowestOf(quiet, 5) {
			res.Slowest = append(res.Slowest, float64(q.took.Microseconds())/1000)
			res.SlowestCommitMs = append(res.SlowestCommitMs, q.commitLEMs)
		}
	}()
	// pair disables the worker (its time goes to *took), runs after (when the disable
	// returned), and enables it; it returns when the disable returned and when the enable was
	// sent.
	pair := func(took *[]time.Duration, after func() error) (window, error) {
		var win window
		for _, disabled := range []bool{true, false} {
			t0 := time.Now()
			if !disabled {
				win.to = t0
			}
			_, err := f.setDisabled(ctx, g, pinned, disabled)
			d := time.Since(t0)
			switch {
			case err != nil && strings.Contains(err.Error(), "not acknowledged"):
				res.NotAllAcked++
			case err != nil:
				return win, err
			}
			if !disabled {
				en = append(en, d)
				continue
			}
			win.from = time.Now()
			*took = append(*took, d)
			if err := after(); err != nil {
				return win, err
			}
		}
		return win, nil
	}
	var lastBuckets map[float64]float64
	probe := func() error {
		lastBuckets, _ = applyBuckets(ctx, lg)
		before, err := f.engineRequests(ctx, pr, pinned)
		if err != nil {
			return err
		}
		ok := 0
		for _, p := range f.gws {
			code, _, _ := p.chat(ctx, wanPinnedModel, "sent after the disable returned")
			res.Probes++
			res.ProbeStatus[code]++
			if code == http.StatusOK {
				ok++
			}
		}
		after, err := f.engineRequests(ctx, pr, pinned)
		if err != nil {
			return err
		}
		res.ReachedAfter += max(ok, int(after-before))
		return nil
	}
	for range w.Writes {
		before, _ := applyBuckets(ctx, lg)
		if _, err := pair(&dis, probe); err != nil {
			return res, err
		}
		// The disable's commit is in the leader's histogram by the time it returned; the enable
		// after it is the next command, so the read comes before the enable is sent: probe
		// reads it.
		quiet = append(quiet, quietWrite{took: dis[len(dis)-1], commitLEMs: commitLE(before, lastBuckets)})
	}
	load := startLoad(ctx, f.gws, 40*w.Writes)
	var wins []window
	// The worker stays disabled for wanLoadDwell after each disable returned, for the load's
	// chats to be sent meanwhile.
	dwell := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wanLoadDwell):
			return nil
		}
	}
	for range w.Writes {
		win, err := pair(&loaded, dwell)
		if err != nil {
			load.stop()
			return res, err
		}
		wins = append(wins, win)
	}
	sends := load.stop()
	res.LoadChats = len(sends)
	res.LoadAfter, res.LoadReachedAfter = judgeLoad(sends, wins)
	for _, s := range sends {
		res.LoadStatus[s.code]++
	}
	return res, nil
}

// wanLoadDwell is how long the loaded half keeps the worker disabled after each disable
// returned: about a forwarded write, so that the load has as many chats in as out.
const wanLoadDwell = 250 * time.Millisecond

// wanLoadEvery paces each gateway's chats of the load: 20 per second per gateway at most, about
// 5 in each window, and little enough CPU on a small machine not to be what the writes measure.
const wanLoadEvery = 50 * time.Millisecond

// quietWrite is one disable of the quiet half: how long it took, and the upper bound of the
// leader's apply-duration bucket its commit fell in (ms; -1: not seen).
type quietWrite struct {
	took       time.Duration
	commitLEMs float64
}

// slowestOf returns the n longest of qs, longest first.
func slowestOf(qs []quietWrite, n int) []quietWrite {
	s := slices.Clone(qs)
	slices.SortFunc(s, func(a, b quietWrite) int { return cmp.Compare(b.took, a.took) })
	return s[:min(n, len(s))]
}

// applyBuckets reads g's meshgw_raft_apply_duration_seconds buckets, summed over commands:
// the cumulative count at each upper bound (seconds).
func applyBuckets(ctx context.Context, g *wanGW) (map[float64]float64, bool) {
	page, ok := metricsPage(ctx, g)
	if !ok {
		return nil, false
	}
	return parseApplyBuckets(page), true
}

// parseApplyBuckets reads the meshgw_raft_apply_duration_seconds buckets of a Prometheus text
// page, summed over commands: the cumulative count at each finite upper bound (seconds).
func parseApplyBuckets(page string) map[float64]float64 {
	out := map[float64]float64{}
	for _, line := range strings.Split(page, "\n") {
		rest, ok := strings.CutPrefix(line, "meshgw_raft_apply_duration_seconds_bucket{")
		if !ok {
			continue
		}
		_, le, ok := strings.Cut(rest, `le="`)
		if !ok {
			continue
		}
		le, val, _ := strings.Cut(le, `"`)
		var bound, n float64
		f := strings.Fields(val[strings.IndexByte(val, '}')+1:])
		if le == "+Inf" || len(f) == 0 {
			continue
		}
		if _, err := fmt.Sscan(le, &bound); err != nil {
			continue
		}
		if _, err := fmt.Sscan(f[0], &n); err == nil {
			out[bound] += n
		}
	}
	return out
}

// commitLE is the smallest upper bound (in ms) whose cumulative count grew from before to
// after: the bucket of the one command applied between them; -1 when none grew.
func commitLE(before, after map[float64]float64) float64 {
	best := -1.0
	for le, n := range after {
		if n > before[le] && (best < 0 || le*1000 < best) {
			best = le * 1000
		}
	}
	return best
}

// over counts the durations longer than ms milliseconds.
func over(ds []time.Duration, ms float64) int {
	n := 0
	for _, d := range ds {
		if float64(d.Microseconds())/1000 > ms {
			n++
		}
	}
	return n
}

// window is from a disable's return until the next enable was sent: the worker is disabled in
// every gateway's routing all along.
type window struct{ from, to time.Time }

// loadSend is one chat of the load: when it was sent and its answer's status (0: none).
type loadSend struct {
	at   time.Time
	code int
}

// judgeLoad counts the chats sent within a window, and those of them answered 200.
func judgeLoad(sends []loadSend, wins []window) (after, reached int) {
	for _, s := range sends {
		for _, w := range wins {
			if !s.at.Before(w.from) && s.at.Before(w.to) {
				after++
				if s.code == http.StatusOK {
					reached++
				}
				break
			}
		}
	}
	return after, reached
}

// chatLoad sends chats for the pinned model through each gateway, one at a time per gateway
// and at most one per wanLoadEvery, at most limit per gateway, until stop.
type chatLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	sends  []loadSend
}

func startLoad(ctx context.Context, gws []*wanGW, limit int) *chatLoad {
	ctx, cancel := context.WithCancel(ctx)
	l := &chatLoad{cancel: cancel}
	for _, g := range gws {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			t := time.NewTicker(wanLoadEvery)
			defer t.Stop()
			for range limit {
				at := time.Now()
				code, _, _ := g.chat(ctx, wanPinnedModel, "load during the writes")
				if ctx.Err() != nil {
					return // cut by stop: not counted
				}
				l.mu.Lock()
				l.sends = append(l.sends, loadSend{at: at, code: code})
				l.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	return l
}

// stop ends the load and returns its chats.
func (l *chatLoad) stop() []loadSend {
	l.cancel()
	l.wg.Wait()
	return l.sends
}
