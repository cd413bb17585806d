package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/meshgw/meshgw/bench/toolcmd"
	"github.com/meshgw/meshgw/ctxtime"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/mesh"
)

// bytesMetric is the counter of every byte of bulletin traffic a node sent.
const bytesMetric = "meshgw_mesh_bulletin_bytes_total"

// BulletinBytesResult is what `meshbench bulletin-bytes` prints: the bulletin traffic of an
// owner of many workers, and of a peer that imports and relays them, with no changes and with
// a steady rate of changes.
type BulletinBytesResult struct {
	Peers   int    `json:"peers"`
	Profile string `json:"profile"`
	Workers int    `json:"workers"`
	// SpreadS is the time from publishing every worker until every peer held them all.
	SpreadS float64 `json:"spread_s"`
	// SettleS is the pause after the spread, before the steady window.
	SettleS float64 `json:"settle_s"`
	WindowS float64 `json:"window_s"`
	// Steady is a window without changes, Churn one with ChurnPerS changes per second.
	Steady    BytesRate `json:"steady"`
	Churn     BytesRate `json:"churn"`
	ChurnPerS float64   `json:"churn_per_s"`
	// ChurnHeldS is how long after the churn window every peer held the final state of every
	// worker; -1 when they did not within 30 s.
	ChurnHeldS float64 `json:"churn_held_s"`
}

// BytesRate is meshgw_mesh_bulletin_bytes_total per second over one window, on the owner and on
// one other peer (node 1).
type BytesRate struct {
	OwnerBytesPerS float64 `json:"owner_bytes_per_s"`
	PeerBytesPerS  float64 `json:"peer_bytes_per_s"`
	Changes        int     `json:"changes"` // health changes published during the window
	WindowS        float64 `json:"window_s"`
}

func runBulletinBytes(ctx context.Context, args []string, stderr io.Writer) (*BulletinBytesResult, error) {
	fs := flag.NewFlagSet("meshbench bulletin-bytes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mf := addMeshFlags(fs, 3, mesh.ProfileLAN, 150*time.Second)
	workers := fs.Int("workers", 10_000, "workers the owner (node 0) publishes")
	window := fs.Duration("window", 30*time.Second, "each measured window (steady, then churn)")
	settle := fs.Duration("settle", 15*time.Second, "pause after every peer holds every worker, before the steady window: "+
		"the gossip of the first publication goes on for about 10 s at 10,000 workers")
	churn := fs.Float64("churn", 100, "health changes per second in the churn window, spread over the workers")
	if err := toolcmd.Parse(fs, args); err != nil {
		return nil, err
	}
	if err := mf.check(); err != nil {
		return nil, err
	}
	switch {
	case *workers < 1 || *workers > 100_000:
		return nil, toolcmd.BadFlags{Msg: "--workers must be 1..100000"}
	case *window <= 0 || *window > 5*time.Minute:
		return nil, toolcmd.BadFlags{Msg: "--window must be in (0, 5m]"}
	case *settle < 0 || *settle > time.Minute:
		return nil, toolcmd.BadFlags{Msg: "--settle must be in [0, 1m]"}
	case *churn <= 0 || *churn > 10_000:
		return nil, toolcmd.BadFlags{Msg: "--churn must be in (0, 10000]"}
	}
	ctx, cancel := context.WithTimeout(ctx, *mf.timeout)
	defer cancel()
	stderr = &lockedWriter{w: stderr}
	c, err := startCluster(*mf.peers, *mf.profile, stderr, mf.level)
	if err != nil {
		return nil, err
	}
	defer c.shutdown()
	if _, err := c.join(ctx); err != nil {
		return nil, err
	}
	tr := newTracker(*mf.peers - 1)
	for i, m := range c.nodes[1:] {
		m.SetBulletinReceiver(tr.receiver(i))
	}
	res := &BulletinBytesResult{Peers: *mf.peers, Profile: *mf.profile, Workers: *workers, SettleS: settle.Seconds(),
		WindowS: window.Seconds(), ChurnPerS: *churn}
	o := newOwner(c.nodes[0], *workers)
	start := time.Now()
	if err := o.publishAll(ctx, tr, 60*time.Second); err != nil {
		return nil, err
	}
	res.SpreadS = round3(time.Since(start).Seconds())
	fmt.Fprintf(stderr, "meshbench: %d peers held the %d workers' bulletins %.3f s after they were published\n", *mf.peers-1, *workers, res.SpreadS)
	if err := ctxtime.Sleep(ctx, *settle); err != nil {
		return nil, err
	}
	if res.Steady, err = measureBytes(ctx, c, *window, nil); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "meshbench: steady: owner %.0f B/s, peer %.0f B/s\n", res.Steady.OwnerBytesPerS, res.Steady.PeerBytesPerS)
	next := 0
	change := func() {
		w := o.ids[next%len(o.ids)]
		next++
		h := health.NotReady
		if o.health[w] == h {
			h = health.Ready
		}
		o.publish(w, h)
	}
	if res.Churn, err = measureBytes(ctx, c, *window, &churner{every: time.Duration(float64(time.Second) / *churn), change: change}); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "meshbench: churn (%d changes): owner %.0f B/s, peer %.0f B/s\n", res.Churn.Changes, res.Churn.OwnerBytesPerS, res.Churn.PeerBytesPerS)
	res.ChurnHeldS = -1
	start = time.Now()
	if err := waitHeld(ctx, tr, o.state(), 30*time.Second); err == nil {
		res.ChurnHeldS = round3(time.Since(start).Seconds())
	} else {
		fmt.Fprintf(stderr, "meshbench: after the churn: %v\n", err)
	}
	return res, nil
}

// churner makes changes at a steady rate.
type churner struct {
	every  time.Duration
	change func()
}

// measureBytes reads the owner's (node 0) and a peer's (node 1) bulletin bytes over window,
// making ch's changes meanwhile when ch is set.
func measureBytes(ctx context.Context, c *cluster, window time.Duration, ch *churner) (BytesRate, error) {
	var r BytesRate
	owner0, err := c.counter(0, bytesMetric)
	if err != nil {
		return r, err
	}
	peer0, err := c.counter(1, bytesMetric)
	if err != nil {
		return r, err
	}
	start := time.Now()
	end := time.NewTimer(window)
	defer end.Stop()
	var tick <-chan time.Time
	if ch != nil {
		t := time.NewTicker(ch.every)
		defer t.Stop()
		tick = t.C
	}
	// The changes follow the wall clock, not the ticks: a tick dropped on a busy machine is made
	// up at the next one.
	for done := false; !done; {
		select {
		case <-tick:
			for due := int(time.Since(start) / ch.every); r.Changes < due; r.Changes++ {
				ch.change()
			}
		case <-end.C:
			done = true
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
	took := time.Since(start).Seconds()
	owner1, err := c.counter(0, bytesMetric)
	if err != nil {
		return r, err
	}
	peer1, err := c.counter(1, bytesMetric)
	if err != nil {
		return r, err
	}
	r.OwnerBytesPerS, r.PeerBytesPerS = math.Round((owner1-owner0)/took), math.Round((peer1-peer0)/took)
	r.WindowS = round3(took)
	return r, nil
}

// waitHeld waits until every peer holds want.
func waitHeld(ctx context.Context, tr *tracker, want map[string]health.State, within time.Duration) error {
	done := tr.expect(want, time.Now())
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-timer.C:
		return fmt.Errorf("%d of %d peers held every worker's last state %s later", tr.holding(), len(tr.held), within)
	case <-ctx.Done():
		return ctx.Err()
	}
}
