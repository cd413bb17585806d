package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/meshgw/meshgw/ownership"
	"github.com/meshgw/meshgw/test/wan"
)

// WANResult is the wan section: three regions over simulated WAN links (test/wan), a gateway
// and two fake engines in each.
type WANResult struct {
	Status  string   `json:"status"` // "measured"
	What    string   `json:"what"`
	Regions []string `json:"regions"`
	DelayMs float64  `json:"one_way_delay_ms"`
	Leader  string   `json:"leader"`
	FormedS float64  `json:"formed_s"`
	// Pinned is the engine added in PinnedRegion (a region without the leader) serving a model
	// no other engine serves: the fleet-acknowledged writes disable it, the failover kills its
	// owner.
	Pinned       string    `json:"pinned"`
	PinnedRegion string    `json:"pinned_region"`
	Local        *WANLocal `json:"local,omitempty"`
	// Link is the round trip from the last region to the first, for scale.
	Link       *WANLink        `json:"link,omitempty"`
	Spill      []WANSpill      `json:"spill,omitempty"`
	FleetAck   []*WANWrites    `json:"fleet_ack,omitempty"`
	Bulletin   *WANPropagation `json:"bulletin,omitempty"`
	CacheIndex *WANPropagation `json:"cache_index,omitempty"`
	Failover   *WANFailover    `json:"failover,omitempty"`
	// Errors names the parts that could not be measured, and why.
	Errors      []string `json:"errors,omitempty"`
	OthersCores float64  `json:"others_cpu_cores"`
}

// runWAN runs the wan section, or says why it cannot here. Every process and namespace it
// made is removed when it returns, whatever happened.
func runWAN(ctx context.Context, ps *procs, o *Options, w *WANOptions) any {
	if ok, why := wan.Usable(); !ok {
		return notMeasured("no simulated WAN here: " + why + " (run make bench as root)")
	}
	w.setDefaults()
	ctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	o.Log.Info("wan: starting 3 regions", "one-way delay", w.Delay)
	f, err := startWANFleet(ps, o, w)
	if f != nil {
		defer f.close()
	}
	if err != nil {
		return notMeasured("wan: starting the fleet: " + err.Error())
	}
	t0 := time.Now()
	if _, err := f.waitFormed(ctx, 0, wanFormWithin); err != nil {
		return notMeasured("wan: " + err.Error())
	}
	formed := time.Since(t0)
	for _, g := range f.gws {
		for _, u := range g.engines {
			if err := f.register(ctx, g, u); err != nil {
				return notMeasured("wan: " + err.Error())
			}
		}
	}
	leader, err := f.waitFormed(ctx, 2*len(f.gws), wanFormWithin)
	if err != nil {
		return notMeasured("wan: " + err.Error())
	}
	res := WANResult{Status: "measured", Regions: wanRegions, DelayMs: float64(w.Delay.Microseconds()) / 1000, Leader: leader,
		FormedS: formed.Seconds()}
	res.What = fmt.Sprintf("regions %s, each a network namespace with a meshgw (--region, --mesh-profile wan, --policy cache_aware, "+
		"--health-check-interval-secs 1, health thresholds 1) and two fakeworkers registered through it (POST /workers with their model "+
		"declared: owned by it, in its region); every link between two "+
		"regions holds each packet %s one way (test/wan's user-space relay in the harness's process); clients dial from inside "+
		"each region", strings.Join(wanRegions, ", "), w.Delay)
	others := ps.startOthers()
	done := func() WANResult {
		res.OthersCores = others.stop()
		return res
	}
	part := func(name string, fn func() error) {
		if ctx.Err() != nil {
			res.Errors = append(res.Errors, name+": not run: "+ctx.Err().Error())
			return
		}
		o.Log.Info("wan: measuring", "part", name)
		if err := fn(); err != nil {
			res.Errors = append(res.Errors, name+": "+err.Error())
			o.Log.Warn("wan: part failed", "part", name, "err", err)
		}
	}
	part("local", func() (err error) { res.Local, err = wanLocal(ctx, f, w); return err })
	part("link", func() (err error) { res.Link, err = wanLink(ctx, f.gws[len(f.gws)-1], f.gws[0], w.Writes); return err })
	eu := f.gws[0]
	for _, run := range []struct {
		off  []string
		kill bool
	}{{eu.engines[:1], true}, {eu.engines, true}, {eu.engines[:1], false}} {
		part(fmt.Sprintf("%d local workers broken (killed %t)", len(run.off), run.kill), func() error {
			s, err := wanSpill(ctx, f, w, eu, run.off, run.kill)
			res.Spill = append(res.Spill, s)
			return err
		})
	}
	lg := f.gw(leader)
	if lg == nil {
		res.Errors = append(res.Errors, errNoLeader.Error())
		return done()
	}
	var followers []*wanGW
	for _, g := range f.gws {
		if g != lg {
			followers = append(followers, g)
		}
	}
	pg := followers[0] // the pinned engine's region, and the gateway killed last
	part("pinned engine", func() (err error) {
		res.PinnedRegion = pg.region
		res.Pinned, err = f.addPinned(ctx, pg)
		return err
	})
	if res.Pinned == "" {
		return done()
	}
	for _, g := range []*wanGW{lg, followers[1]} {
		part("fleet-acknowledged writes through "+g.id, func() error {
			r, err := wanWrites(ctx, f, w, g, lg, pg.r, res.Pinned)
			res.FleetAck = append(res.FleetAck, r)
			return err
		})
	}
	part("bulletins", func() (err error) { res.Bulletin, err = wanBulletins(ctx, f, w); return err })
	part("cache index", func() (err error) { res.CacheIndex, err = wanCacheIndex(ctx, f, w); return err })
	if !w.NoFailover {
		part("failover", func() (err error) { res.Failover, err = wanFailover(ctx, f, pg, lg, pg.id == leader); return err })
	}
	return done()
}

// addPinned starts an engine serving wanPinnedModel on host 3 of g's region, registers it
// through g (so g owns it, in g's region), and waits until every gateway can route to it.
func (f *wanFleet) addPinned(ctx context.Context, g *wanGW) (string, error) {
	u, err := f.startEngine(&wanEngine{r: g.r, h: 3, name: "wan-engine-" + g.region + "-pinned", model: wanPinnedModel})
	if err != nil {
		return "", err
	}
	if err := f.register(ctx, g, u); err != nil {
		return "", err
	}
	return u, f.routableEverywhere(ctx, u, true, 30*time.Second)
}

// wanFailover kills victim (kill -9 of its process group) and times, on watcher, until every
// worker victim owned is owned by a live gateway at a higher epoch, and until a chat for the
// pinned model through watcher is answered 200 after that; it sends one such chat per poll.
func wanFailover(ctx context.Context, f *wanFleet, victim, watcher *wanGW, wasLeader bool) (*WANFailover, error) {
	ws, err := f.workers(ctx, watcher)
	if err != nil {
		return nil, err
	}
	before := map[string]uint64{}
	for _, w := range ws {
		if w.Owner == victim.id {
			before[w.URL] = w.Epoch
		}
	}
	if len(before) == 0 {
		return nil, fmt.Errorf("%s shows no worker owned by %s", watcher.id, victim.id)
	}
	res := &WANFailover{Killed: victim.id, WasLeader: wasLeader, Workers: len(before), GraceS: ownership.DefaultFailoverGrace.Seconds(), Watcher: watcher.id}
	victim.p.Kill()
	killed := time.Now()
	owned := time.Time{}
	deadline := killed.Add(2 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if res.SeenS == 0 {
			var peers struct {
				Peers []struct{ ID, Status string } `json:"peers"`
			}
			if _, err := f.admin(ctx, watcher, http.MethodGet, "/mesh/peers", "", &peers); err == nil {
				for _, p := range peers.Peers {
					if p.ID == victim.id && p.Status != "alive" {
						res.SeenS, res.SeenAs = time.Since(killed).Seconds(), p.Status
					}
				}
			}
		}
		if owned.IsZero() {
			if ws, err := f.workers(ctx, watcher); err == nil {
				if owners, ok := movedFrom(ws, before, victim.id); ok {
					owned, res.NewOwners = time.Now(), owners
					res.OwnedS = owned.Sub(killed).Seconds()
				}
			}
		}
		code, _, err := watcher.chat(ctx, wanPinnedModel, "during the failover")
		res.Chats++
		if err != nil || code != http.StatusOK {
			res.FailedChats++
		} else if !owned.IsZero() {
			res.RoutedS = time.Since(killed).Seconds()
			return res, nil
		}
		if watcher.p.Exited() {
			return res, fmt.Errorf("%s exited", watcher.id)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return res, fmt.Errorf("the %d workers of the killed %s were not owned and routed again within 2 min (owned after %.1f s)",
		len(before), victim.id, res.OwnedS)
}

// movedFrom reports whether every worker of before (URL → epoch when its owner died) is in ws,
// owned by a gateway other than dead at a higher epoch, and returns the new owners.
func movedFrom(ws []wanWorker, before map[string]uint64, dead string) ([]string, bool) {
	var owners []string
	moved := 0
	for _, w := range ws {
		e, ok := before[w.URL]
		if !ok {
			continue
		}
		if w.Owner == dead || w.Owner == "" || w.Epoch <= e {
			return nil, false
		}
		moved++
		if !slices.Contains(owners, w.Owner) {
			owners = append(owners, w.Owner)
		}
	}
	slices.Sort(owners)
	return owners, moved == len(before)
}

// printWAN writes the wan section's lines.
func printWAN(w io.Writer, name string, r WANResult) {
	fmt.Fprintf(w, "%s: %s; leader %s; formed in %.1f s\n", name, r.What, r.Leader, r.FormedS)
	if l := r.Local; l != nil {
		fmt.Fprintf(w, "%s: local workers healthy: %d chats through the 3 gateways, %d crossed regions, %d failed; through a gateway "+
			"p50 %.2f ms, p99 %.2f ms; straight to an engine p50 %.2f ms, p99 %.2f ms; added p50 %+.2f ms, p99 %+.2f ms\n", name,
			l.Requests, l.Crossed, l.Failed, l.GatewayP50Ms, l.GatewayP99Ms, l.DirectP50Ms, l.DirectP99Ms,
			l.GatewayP50Ms-l.DirectP50Ms, l.GatewayP99Ms-l.DirectP99Ms)
	}
	if l := r.Link; l != nil {
		fmt.Fprintf(w, "%s: link round trip %s to %s (a chat straight to an engine over a kept-alive connection): %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
			name, l.From, l.To, l.Requests, l.P50Ms, l.P99Ms, l.MaxMs)
	}
	for _, s := range r.Spill {
		fmt.Fprintf(w, "%s: %s: %d chats through %s (%d in flight), %d crossed (%.1f %%; the 1.4 rule predicts %.1f %%), %d lost; by region %v\n",
			name, s.Broken, s.Requests, s.Gateway, s.InFlight, s.Crossed, 100*s.CrossedShare, 100*s.PredictedShare, s.Failed, s.ByRegion)
	}
	for _, a := range r.FleetAck {
		via := "forwarded to the leader"
		if a.Leader {
			via = "the leader"
		}
		fmt.Fprintf(w, "%s: fleet-acknowledged disables through %s (%s): %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d over %.0f ms (slowest %v, their commits on the leader within %v ms) "+
			"(enables p50 %.1f ms, "+
			"p99 %.1f ms); %d not acknowledged by all; %d chats through every gateway after the disables returned, %d reached the "+
			"worker (answers %v); under load, %d disables p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d over), %d of %d chats sent while "+
			"disabled, %d reached the worker (answers %v)\n", name, a.Through, via, a.Writes, a.P50Ms, a.P99Ms, a.MaxMs,
			a.OverTarget, goalWANFleetAckP99Ms, a.Slowest, a.SlowestCommitMs, a.EnableP50Ms, a.EnableP99Ms, a.NotAllAcked, a.Probes, a.ReachedAfter, a.ProbeStatus, a.LoadedWrites, a.LoadedP50Ms,
			a.LoadedP99Ms, a.LoadedMaxMs, a.LoadedOverTarget, a.LoadAfter, a.LoadChats, a.LoadReachedAfter, a.LoadStatus)
	}
	for _, p := range []struct {
		what string
		v    *WANPropagation
	}{{"bulletin propagation", r.Bulletin}, {"cache index propagation", r.CacheIndex}} {
		if p.v != nil {
			fmt.Fprintf(w, "%s: %s from %s to %s: %d samples, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d lost (%s)\n", name, p.what,
				p.v.From, strings.Join(p.v.To, ", "), p.v.Samples, p.v.P50Ms, p.v.P99Ms, p.v.MaxMs, p.v.Lost, p.v.What)
		}
	}
	if v := r.Failover; v != nil {
		fmt.Fprintf(w, "%s: failover after kill -9 of %s (leader: %t, %d workers, %g s grace): %s's mesh showed it %s after %.1f s; owned by %v after %.1f s; a chat for "+
			"the pinned model through %s answered 200 by them %.1f s after the kill (%d of %d chats failed meanwhile)\n", name,
			v.Killed, v.WasLeader, v.Workers, v.GraceS, v.Watcher, v.SeenAs, v.SeenS, v.NewOwners, v.OwnedS, v.Watcher, v.RoutedS, v.FailedChats, v.Chats)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "%s: not measured: %s\n", name, e)
	}
}
