package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshgw/meshgw/gateway/locality"
)

// WANLocal is the healthy run: chats through each gateway in turn, each followed (or preceded,
// in turn) by the same chat sent straight to one of the gateway's own engines.
type WANLocal struct {
	Requests int `json:"requests"`
	// Crossed counts answers whose X-Mesh-Worker-Region is not the gateway's region.
	Crossed      int     `json:"crossed"`
	Failed       int     `json:"failed"`
	GatewayP50Ms float64 `json:"gateway_p50_ms"`
	GatewayP99Ms float64 `json:"gateway_p99_ms"`
	DirectP50Ms  float64 `json:"direct_p50_ms"`
	DirectP99Ms  float64 `json:"direct_p99_ms"`
	FirstError   string  `json:"first_error,omitempty"`
}

// WANLink is the round trip between two regions as an HTTP client sees it: a chat from a client
// in one region straight to an engine in another, over a kept-alive connection (one round trip
// of the link, plus the engine's answer).
type WANLink struct {
	From     string  `json:"from"`
	To       string  `json:"to"`
	Requests int     `json:"requests"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
}

// wanLink times n chats from a client in from's region straight to engine u of another region,
// after one that opens the connection.
func wanLink(ctx context.Context, from *wanGW, to *wanGW, n int) (*WANLink, error) {
	u := to.engines[len(to.engines)-1]
	var lat []time.Duration
	for i := range n + 1 {
		t0 := time.Now()
		code, _, err := postChat(ctx, from.client, u, wanModel, "a round trip across the WAN")
		if err != nil || code != http.StatusOK {
			return nil, fmt.Errorf("a chat from %s's region to %s: status %d, %v", from.region, u, code, err)
		}
		if i > 0 {
			lat = append(lat, time.Since(t0))
		}
	}
	l := &WANLink{From: from.region, To: to.region, Requests: len(lat)}
	l.P50Ms, l.P99Ms, l.MaxMs = quantiles(lat)
	return l, nil
}

// WANSpill is a run through one gateway with some of its region's workers disabled.
type WANSpill struct {
	Gateway string `json:"gateway"`
	// Kind is how the workers were broken, "killed" or "disabled"; Broken says it in words.
	Kind          string `json:"kind"`
	Broken        string `json:"broken"`
	LocalRoutable int    `json:"local_routable"`
	LocalTotal    int    `json:"local_total"`
	Requests      int    `json:"requests"`
	InFlight      int    `json:"in_flight"`
	Crossed       int    `json:"crossed"`
	// Failed counts chats not answered 200: lost.
	Failed   int            `json:"failed"`
	ByRegion map[string]int `json:"by_region"`
	// CrossedShare is Crossed ÷ answered; PredictedShare what the locality rule gives
	// (localityCross).
	CrossedShare   float64 `json:"crossed_share"`
	PredictedShare float64 `json:"predicted_share"`
	FirstError     string  `json:"first_error,omitempty"`
}

// WANPropagation is the time a change made through one gateway takes to be seen by the others.
type WANPropagation struct {
	From    string   `json:"from"`
	To      []string `json:"to"`
	Samples int      `json:"samples"`
	P50Ms   float64  `json:"p50_ms"`
	P99Ms   float64  `json:"p99_ms"`
	MaxMs   float64  `json:"max_ms"`
	Lost    int      `json:"lost"`
	What    string   `json:"what"`
}

// WANFailover is the failover of a region's owner after kill -9.
type WANFailover struct {
	Killed    string  `json:"killed"`
	WasLeader bool    `json:"was_leader"`
	Workers   int     `json:"workers"`
	GraceS    float64 `json:"grace_s"`
	// SeenS is when Watcher's GET /mesh/peers first showed the killed gateway other than alive
	// (SeenAs: suspect, dead, left), from the kill.
	SeenS     float64  `json:"seen_s"`
	SeenAs    string   `json:"seen_as"`
	OwnedS    float64  `json:"owned_s"`
	NewOwners []string `json:"new_owners"`
	// RoutedS is the first chat for the pinned model through Watcher answered 200 once the
	// workers were owned again; Chats and FailedChats count those sent from the kill on.
	Watcher     string  `json:"watcher"`
	RoutedS     float64 `json:"routed_s"`
	Chats       int     `json:"chats"`
	FailedChats int     `json:"failed_chats"`
}

// localityCross is the share of requests the locality rule sends away from a region with
// routable of its total workers for the model routable, the other regions having some routable:
// 1 − min(1, factor × routable ÷ total) (gateway/locality).
func localityCross(routable, total int, factor float64) float64 {
	if total == 0 {
		return 1
	}
	return 1 - min(1, factor*float64(routable)/float64(total))
}

// wanLocal sends w.Requests chats through the gateways in turn, each paired with the same chat
// sent straight to one of that gateway's engines (in turn first or second).
func wanLocal(ctx context.Context, f *wanFleet, w *WANOptions) (*WANLocal, error) {
	l := &WANLocal{}
	var viaGW, direct []time.Duration
	fail := func(what string, code int, err error) {
		l.Failed++
		if l.FirstError == "" {
			l.FirstError = fmt.Sprintf("%s: status %d, %v", what, code, err)
		}
	}
	for i := range w.Requests {
		if ctx.Err() != nil {
			return l, ctx.Err()
		}
		g := f.gws[i%len(f.gws)]
		text := fmt.Sprintf("wan locality check %d", i)
		for k := range 2 {
			if (k == 0) == (i%2 == 0) {
				t0 := time.Now()
				code, region, err := g.chat(ctx, wanModel, text)
				d := time.Since(t0)
				l.Requests++
				if err != nil || code != http.StatusOK {
					fail("through "+g.id, code, err)
					continue
				}
				viaGW = append(viaGW, d)
				if region != g.region {
					l.Crossed++
				}
				continue
			}
			e := g.engines[(i/len(f.gws))%len(g.engines)]
			t0 := time.Now()
			code, _, err := postChat(ctx, g.client, e, wanModel, text)
			d := time.Since(t0)
			if err != nil || code != http.StatusOK {
				fail("direct to "+e, code, err)
				continue
			}
			direct = append(direct, d)
		}
	}
	l.GatewayP50Ms, l.GatewayP99Ms, _ = quantiles(viaGW)
	l.DirectP50Ms, l.DirectP99Ms, _ = quantiles(direct)
	return l, nil
}

// setDisabled writes a worker's disabled flag through g and fails unless every gateway
// acknowledged it.
func (f *wanFleet) setDisabled(ctx context.Context, g *wanGW, u string, disabled bool) (wanWorker, error) {
	body := `{"disabled":false}`
	if disabled {
		body = `{"disabled":true,"reason":"make bench, wan section"}`
	}
	var rec wanWorker
	if _, err := f.admin(ctx, g, http.MethodPut, workerPath(u), body, &rec); err != nil {
		return rec, err
	}
	if rec.FleetAck == nil || len(rec.FleetAck.Lagging) > 0 || len(rec.FleetAck.Acked) != len(f.gws) {
		return rec, fmt.Errorf("PUT %s disabled=%t through %s: not acknowledged by every gateway: %+v", u, disabled, g.id, rec.FleetAck)
	}
	return rec, nil
}

// wanSpill breaks the workers off of g's region, sends w.SpillRequests chats through g,
// w.InFlight at a time, and repairs the workers. With kill, each is killed (kill -9) and the
// chats start once every gateway shows it not routable (its owner's health probe failed); it is
// started again after. Otherwise each is disabled through g (fleet-acknowledged) and enabled
// after. A disabled worker is out of service, not counted in its region (gateway/locality.go);
// a killed one counts as a worker of the region that is not routable.
func wanSpill(ctx context.Context, f *wanFleet, w *WANOptions, g *wanGW, off []string, kill bool) (WANSpill, error) {
	s := WANSpill{Gateway: g.id, InFlight: w.InFlight, LocalTotal: len(g.engines), LocalRoutable: len(g.engines) - len(off), ByRegion: map[string]int{}}
	s.Kind = "disabled"
	if kill {
		s.Kind = "killed"
		s.Broken = fmt.Sprintf("%d of %d of %s's engines killed (kill -9; health: not routable)", len(off), len(g.engines), g.region)
	} else {
		s.Broken = fmt.Sprintf("%d of %d of %s's workers disabled (PUT /workers/{id} {\"disabled\":true}, fleet-acknowledged; out of service, not counted)",
			len(off), len(g.engines), g.region)
		s.LocalTotal = s.LocalRoutable
	}
	s.PredictedShare = localityCross(s.LocalRoutable, s.LocalTotal, locality.DefaultFactor)
	repair := func() error {
		for _, u := range off {
			if !kill {
				if _, err := f.setDisabled(context.WithoutCancel(ctx), g, u, false); err != nil {
					return err
				}
				continue
			}
			if _, err := f.startEngine(f.engines[u]); err != nil {
				return err
			}
			if err := f.routableEverywhere(ctx, u, true, 30*time.Second); err != nil {
				return err
			}
		}
		return nil
	}
	for _, u := range off {
		if kill {
			f.killEngine(u)
			if err := f.routableEverywhere(ctx, u, false, 30*time.Second); err != nil {
				return s, errors.Join(err, repair())
			}
		} else if _, err := f.setDisabled(ctx, g, u, true); err != nil {
			return s, errors.Join(err, repair())
		}
	}
	var mu sync.Mutex
	next := 0
	var wg sync.WaitGroup
	for range w.InFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= w.SpillRequests || ctx.Err() != nil {
					return
				}
				code, region, err := g.chat(ctx, wanModel, fmt.Sprintf("wan spill check %d", i))
				mu.Lock()
				s.Requests++
				if err != nil || code != http.StatusOK {
					s.Failed++
					if s.FirstError == "" {
						s.FirstError = fmt.Sprintf("status %d, %v", code, err)
					}
				} else {
					s.ByRegion[region]++
					if region != g.region {
						s.Crossed++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok := s.Requests - s.Failed; ok > 0 {
		s.CrossedShare = float64(s.Crossed) / float64(ok)
	}
	return s, errors.Join(ctx.Err(), repair())
}

// watchSeen polls get on every gateway of gws at once, every tick, until each has reported
// true or within passes, and returns when each first did (zero: never).
func watchSeen(ctx context.Context, gws []*wanGW, within, tick time.Duration, seen func(ctx context.Context, g *wanGW) bool) []time.Time {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	at := make([]time.Time, len(gws))
	var wg sync.WaitGroup
	for i, g := range gws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(tick)
			defer t.Stop()
			for {
				if seen(ctx, g) {
					at[i] = time.Now()
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	wg.Wait()
	return at
}

// propagation summarizes samples (lost ones not among them).
func propagation(from *wanGW, to []*wanGW, samples []time.Duration, lost int, what string) *WANPropagation {
	p := &WANPropagation{From: from.id, Samples: len(samples), Lost: lost, What: what}
	for _, g := range to {
		p.To = append(p.To, g.id)
	}
	p.P50Ms, p.P99Ms, p.MaxMs = quantiles(samples)
	return p
}

// wanBulletins flips the health of one of the first region's engines w.Trials times each way
// (POST /_fault to the engine) and times, for each other gateway, from the first poll at which
// the owner showed the new health_state to the first at which that gateway did (bulletins).
func wanBulletins(ctx context.Context, f *wanFleet, w *WANOptions) (*WANPropagation, error) {
	owner, others := f.gws[0], f.gws[1:]
	u := owner.engines[0]
	defer func() { _ = sendFault(context.WithoutCancel(ctx), owner.client, u, `{}`) }()
	var samples []time.Duration
	lost := 0
	for range w.Trials {
		for _, status := range []int{503, 200} {
			rec, err := f.worker(ctx, owner, u)
			if err != nil {
				return nil, err
			}
			old := rec.HealthState
			if err := sendFault(ctx, owner.client, u, fmt.Sprintf(`{"health_status":%d}`, status)); err != nil {
				return nil, err
			}
			// The owner changes within a probe interval (1 s); every gateway, once the owner did.
			at := watchSeen(ctx, f.gws, 15*time.Second, 5*time.Millisecond, func(ctx context.Context, g *wanGW) bool {
				r, err := f.worker(ctx, g, u)
				return err == nil && r.HealthState != old
			})
			if at[0].IsZero() {
				return nil, fmt.Errorf("the owner %s never showed %s's health leave %q after health_status %d", owner.id, u, old, status)
			}
			for i := range others {
				if t := at[i+1]; t.IsZero() {
					lost++
				} else {
					samples = append(samples, max(0, t.Sub(at[0])))
				}
			}
		}
	}
	return propagation(owner, others, samples, lost, fmt.Sprintf("health_state of %s (owned by %s) in GET /workers/{id}?consistent=false, "+
		"each gateway polled every 5 ms from its region; from the owner showing the change to each other gateway showing it; "+
		"%d flips to 503 and back", u, owner.id, w.Trials)), ctx.Err()
}

func sendFault(ctx context.Context, c *http.Client, engineURL, body string) error {
	return send(ctx, c, http.MethodPost, engineURL+"/_fault", body, nil)
}

// metricsPage is g's /metrics page, read from its region.
func metricsPage(ctx context.Context, g *wanGW) (string, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.metrics, nil)
	if err != nil {
		return "", false
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var buf strings.Builder
	if _, err := io.Copy(&buf, io.LimitReader(resp.Body, 16<<20)); err != nil || resp.StatusCode != http.StatusOK {
		return "", false
	}
	return buf.String(), true
}

// metricSum adds up the samples of the metric name on g's /metrics (0 when absent).
func metricSum(ctx context.Context, g *wanGW, name string) (float64, bool) {
	page, ok := metricsPage(ctx, g)
	if !ok {
		return 0, false
	}
	return sumMetric(page, name), true
}

// sumMetric adds up the values of every sample of name (any labels) in a Prometheus text page.
func sumMetric(page, name string) float64 {
	var sum float64
	for _, line := range strings.Split(page, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(f[0], &v); err == nil {
			sum += v
		}
	}
	return sum
}

// wanCacheIndex sends w.Trials chats with fresh 2 KiB prompts through the first region's gateway
// and times, from its answer, until each other gateway's fleet-wide cache index
// (meshgw_cache_index_bytes) grew as much as the first gateway's did.
func wanCacheIndex(ctx context.Context, f *wanFleet, w *WANOptions) (*WANPropagation, error) {
	const name = "meshgw_cache_index_bytes"
	src, others := f.gws[0], f.gws[1:]
	var samples []time.Duration
	lost := 0
	for trial := range w.Trials {
		base := make([]float64, len(f.gws))
		for i, g := range f.gws {
			v, ok := metricSum(ctx, g, name)
			if !ok {
				return nil, fmt.Errorf("%s: no /metrics", g.id)
			}
			base[i] = v
		}
		prompt := fmt.Sprintf("trial %d of the wan cache index run. ", trial) + strings.Repeat(fmt.Sprintf("filler of trial %d; ", trial), 110)
		code, _, err := src.chat(ctx, wanModel, prompt)
		answered := time.Now()
		if err != nil || code != http.StatusOK {
			return nil, fmt.Errorf("a chat through %s: status %d, %v", src.id, code, err)
		}
		var grew float64
		at := watchSeen(ctx, []*wanGW{src}, 5*time.Second, 5*time.Millisecond, func(ctx context.Context, g *wanGW) bool {
			v, _ := metricSum(ctx, g, name)
			grew = v - base[0]
			return grew > 0
		})
		if at[0].IsZero() {
			return nil, fmt.Errorf("%s's %s did not grow after a chat with a new 2 KiB prompt (is its policy cache_aware with --cache-scope fleet?)", src.id, name)
		}
		at = watchSeen(ctx, others, 10*time.Second, 5*time.Millisecond, func(ctx context.Context, g *wanGW) bool {
			v, _ := metricSum(ctx, g, name)
			return v-base[slices.Index(f.gws, g)] >= grew
		})
		for _, t := range at {
			if t.IsZero() {
				lost++
			} else {
				samples = append(samples, t.Sub(answered))
			}
		}
	}
	return propagation(src, others, samples, lost, fmt.Sprintf("%d chats with fresh 2 KiB prompts through %s (cache_aware, "+
		"--cache-scope fleet); from the answer until each other gateway's %s grew as much as %s's did, polled every 5 ms",
		w.Trials, src.id, name, src.id)), ctx.Err()
}
