package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/meshgw/meshgw/bench/toolcmd"
	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/ctxtime"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/mesh"
)

// BulletinsResult is what `meshbench bulletins` prints: how long a worker's health change takes
// from its owner's Publish to each other peer's bulletin receiver.
type BulletinsResult struct {
	Peers   int    `json:"peers"`
	Profile string `json:"profile"`
	Workers int    `json:"workers"` // published by the owner; each trial flips one
	Trials  int    `json:"trials"`
	// Pairs is trials × (peers − 1): one figure per (trial, peer that is not the owner).
	Pairs int `json:"pairs"`
	// P50Ms, P99Ms and MaxMs are over the pairs (nearest rank); a pair that never arrived
	// within BoundMs counts as BoundMs.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// Lost counts the pairs that had not arrived BoundMs after the Publish.
	Lost    int     `json:"lost"`
	BoundMs float64 `json:"bound_ms"`
	// Over1s counts the pairs that took longer than 1 s, lost ones included.
	Over1s int `json:"over_1s"`
	// AllP50Ms and AllP99Ms are over the trials: the time until the last peer had the change.
	AllP50Ms float64 `json:"all_peers_p50_ms"`
	AllP99Ms float64 `json:"all_peers_p99_ms"`
	// Slowest are the latest pairs, slowest first (at most 5).
	Slowest []SlowPair `json:"slowest"`
	// ConvergeS is how long the membership took to converge before the trials.
	ConvergeS float64 `json:"converge_s"`
}

// SlowPair is one late (trial, peer) pair; Ms is -1 when the change never arrived.
type SlowPair struct {
	Trial int     `json:"trial"`
	Peer  string  `json:"peer"`
	Ms    float64 `json:"ms"`
}

func runBulletins(ctx context.Context, args []string, stderr io.Writer) (*BulletinsResult, error) {
	fs := flag.NewFlagSet("meshbench bulletins", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mf := addMeshFlags(fs, 3, mesh.ProfileLAN, 80*time.Second)
	workers := fs.Int("workers", 10, "workers the owner (node 0) publishes; trial i flips worker i mod workers")
	trials := fs.Int("trials", 50, "health changes timed, one after the other")
	bound := fs.Duration("bound", 5*time.Second, "how long a trial waits for every peer; later counts as lost")
	if err := toolcmd.Parse(fs, args); err != nil {
		return nil, err
	}
	if err := mf.check(); err != nil {
		return nil, err
	}
	switch {
	case *workers < 1 || *workers > 100_000:
		return nil, toolcmd.BadFlags{Msg: "--workers must be 1..100000"}
	case *trials < 1 || *trials > 10_000:
		return nil, toolcmd.BadFlags{Msg: "--trials must be 1..10000"}
	case *bound <= 0 || *bound > time.Minute:
		return nil, toolcmd.BadFlags{Msg: "--bound must be in (0, 1m]"}
	}
	ctx, cancel := context.WithTimeout(ctx, *mf.timeout)
	defer cancel()
	stderr = &lockedWriter{w: stderr}
	c, err := startCluster(*mf.peers, *mf.profile, stderr, mf.level)
	if err != nil {
		return nil, err
	}
	defer c.shutdown()
	took, err := c.join(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "meshbench: %d peers (%s) converged in %.3f s\n", *mf.peers, *mf.profile, took.Seconds())
	tr := newTracker(*mf.peers - 1)
	for i, m := range c.nodes[1:] {
		m.SetBulletinReceiver(tr.receiver(i))
	}
	o := newOwner(c.nodes[0], *workers)
	if err := o.publishAll(ctx, tr, 30*time.Second); err != nil {
		return nil, err
	}
	var pairs [][]time.Duration
	for trial := range *trials {
		at, err := o.flip(ctx, tr, trial%*workers, *bound)
		if err != nil {
			return nil, fmt.Errorf("trial %d: %w", trial+1, err)
		}
		pairs = append(pairs, at)
	}
	res := summarizeTrials(pairs, *bound, func(i int) string { return c.nodes[i+1].ID() })
	res.Peers, res.Profile, res.Workers, res.Trials, res.ConvergeS = *mf.peers, *mf.profile, *workers, *trials, round3(took.Seconds())
	fmt.Fprintf(stderr, "meshbench: %d trials × %d peers: p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d lost\n",
		res.Trials, res.Peers-1, res.P50Ms, res.P99Ms, res.MaxMs, res.Lost)
	return res, nil
}

// spacing keeps two changes of one worker further apart than the owner's coalesce window, so
// that no trial waits for the window.
const spacing = mesh.DefaultCoalesce + 50*time.Millisecond

// jitter bounds the random pause before each trial: two of the lan profile's gossip intervals.
const jitter = 100 * time.Millisecond

// owner publishes its workers' bulletins from node 0.
type owner struct {
	m       *mesh.Mesh
	ids     []string
	health  map[string]health.State
	changed map[string]time.Time // last Publish per worker
}

func newOwner(m *mesh.Mesh, n int) *owner {
	o := &owner{m: m, health: make(map[string]health.State, n), changed: make(map[string]time.Time, n)}
	for i := range n {
		o.ids = append(o.ids, fmt.Sprintf("w-%012x", i)) // the length of a real id (worker.NewID)
	}
	return o
}

func (o *owner) publish(w string, h health.State) {
	o.health[w] = h
	o.changed[w] = time.Now()
	o.m.Publish(mesh.Bulletin{Worker: w, Epoch: 1, Health: h, Breaker: breaker.Closed, ProbeInterval: time.Second})
}

// publishAll publishes every worker ready and waits until every peer holds them all.
func (o *owner) publishAll(ctx context.Context, tr *tracker, within time.Duration) error {
	want := make(map[string]health.State, len(o.ids))
	for _, w := range o.ids {
		want[w] = health.Ready
	}
	done := tr.expect(want, time.Now())
	for _, w := range o.ids {
		o.publish(w, health.Ready)
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-timer.C:
		return fmt.Errorf("%d of %d peers held the %d workers' bulletins %s after they were published", tr.holding(), len(tr.held), len(o.ids), within)
	case <-ctx.Done():
		return fmt.Errorf("%d of %d peers held the %d workers' bulletins before the timeout", tr.holding(), len(tr.held), len(o.ids))
	}
}

// state returns every worker's last published health.
func (o *owner) state() map[string]health.State {
	want := make(map[string]health.State, len(o.health))
	for w, h := range o.health {
		want[w] = h
	}
	return want
}

// flip changes worker i's health (ready ↔ not_ready) and returns, per peer, the time from the
// Publish until the peer held the new health; -1 for a peer that did not within bound.
func (o *owner) flip(ctx context.Context, tr *tracker, i int, bound time.Duration) ([]time.Duration, error) {
	w := o.ids[i]
	next := health.NotReady
	if o.health[w] == next {
		next = health.Ready
	}
	// A random pause first: a trial that started right after the last one ended would publish
	// just after a gossip round every time, and measure that phase only.
	wait := max(time.Until(o.changed[w].Add(spacing)), rand.N(jitter))
	if wait > 0 {
		if err := ctxtime.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
	done := tr.expect(map[string]health.State{w: next}, time.Now())
	o.publish(w, next)
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return tr.arrivals(), nil
}

// summarizeTrials reduces the arrival times of every trial (one per peer, -1 when lost) to the
// percentiles over all pairs and over the trials' slowest peer; a lost pair counts as bound.
// peer names peer index i.
func summarizeTrials(trials [][]time.Duration, bound time.Duration, peer func(i int) string) *BulletinsResult {
	res := &BulletinsResult{BoundMs: ms(bound), Slowest: []SlowPair{}}
	var all, last []time.Duration
	for t, at := range trials {
		slowest := time.Duration(0)
		for i, d := range at {
			sp := SlowPair{Trial: t + 1, Peer: peer(i), Ms: ms(d)}
			if d < 0 {
				res.Lost++
				d, sp.Ms = bound, -1
			}
			if d > time.Second {
				res.Over1s++
			}
			all = append(all, d)
			slowest = max(slowest, d)
			res.Slowest = append(res.Slowest, sp)
		}
		last = append(last, slowest)
	}
	res.Pairs = len(all)
	slices.Sort(all)
	slices.Sort(last)
	res.P50Ms, res.P99Ms, res.MaxMs = ms(nearestRank(all, 0.50)), ms(nearestRank(all, 0.99)), ms(nearestRank(all, 1))
	res.AllP50Ms, res.AllP99Ms = ms(nearestRank(last, 0.50)), ms(nearestRank(last, 0.99))
	slices.SortStableFunc(res.Slowest, func(a, b SlowPair) int { return cmpLate(b.Ms, a.Ms) })
	res.Slowest = res.Slowest[:min(len(res.Slowest), 5)]
	return res
}

// cmpLate orders arrival times with lost (-1) as the latest.
func cmpLate(a, b float64) int {
	if a < 0 {
		a = math.Inf(1)
	}
	if b < 0 {
		b = math.Inf(1)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// nearestRank returns the q-quantile of sorted d by nearest rank; 0 when d is empty.
func nearestRank(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// ms is d in milliseconds, rounded to a microsecond.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
