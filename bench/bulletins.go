package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// BulletinPropagation is what `meshbench bulletins` prints: the time from an owner's Publish of
// a worker's health change until each other peer's bulletin receiver has it.
type BulletinPropagation struct {
	Peers   int    `json:"peers"`
	Profile string `json:"profile"`
	Workers int    `json:"workers"`
	Trials  int    `json:"trials"`
	Pairs   int    `json:"pairs"` // trials × (peers − 1)
	// Percentiles over the pairs (nearest rank); a lost pair counts as BoundMs.
	P50Ms     float64    `json:"p50_ms"`
	P99Ms     float64    `json:"p99_ms"`
	MaxMs     float64    `json:"max_ms"`
	Lost      int        `json:"lost"`
	BoundMs   float64    `json:"bound_ms"`
	Over1s    int        `json:"over_1s"`
	AllP50Ms  float64    `json:"all_peers_p50_ms"` // per trial, until the last peer had it
	AllP99Ms  float64    `json:"all_peers_p99_ms"`
	Slowest   []SlowPair `json:"slowest"`
	ConvergeS float64    `json:"converge_s"`
	What      string     `json:"what"`
}

// SlowPair is one of the latest (trial, peer) pairs of a BulletinPropagation.
type SlowPair struct {
	Trial int     `json:"trial"`
	Peer  string  `json:"peer"`
	Ms    float64 `json:"ms"` // -1: never arrived
}

// BulletinBytes is what `meshbench bulletin-bytes` prints: meshgw_mesh_bulletin_bytes_total per
// second of an owner of many workers and of one other peer, without and with changes.
type BulletinBytes struct {
	Peers      int       `json:"peers"`
	Profile    string    `json:"profile"`
	Workers    int       `json:"workers"`
	SpreadS    float64   `json:"spread_s"`
	SettleS    float64   `json:"settle_s"`
	WindowS    float64   `json:"window_s"`
	Steady     BytesRate `json:"steady"`
	Churn      BytesRate `json:"churn"`
	ChurnPerS  float64   `json:"churn_per_s"`
	ChurnHeldS float64   `json:"churn_held_s"`
	What       string    `json:"what"`
}

// BytesRate is one window of BulletinBytes.
type BytesRate struct {
	OwnerBytesPerS float64 `json:"owner_bytes_per_s"`
	PeerBytesPerS  float64 `json:"peer_bytes_per_s"`
	Changes        int     `json:"changes"`
	WindowS        float64 `json:"window_s"`
}

// goalBulletinP99Ms bounds the propagation p99 at goalBulletinPeers (lan profile): a worker its
// owner takes out of routing leaves every gateway's routing within it.
const (
	goalBulletinP99Ms   = 1000.0
	goalBulletinPeers   = 100
	bulletinBytesWithin = 170 * time.Second
)

// runBulletins measures bulletin propagation at each of m.BulletinPeers; any failed run leaves
// the part not measured, with the reason.
func runBulletins(ctx context.Context, ps *procs, o *Options, m *MeshOptions) any {
	var runs []BulletinPropagation
	for _, n := range m.BulletinPeers {
		o.Log.Info("mesh: bulletin propagation", "peers", n, "trials", m.BulletinTrials)
		var r BulletinPropagation
		if err := runMeshbench(ctx, ps, m, fmt.Sprintf("meshbench-bulletins-%d", n), meshbenchWithin, &r, "bulletins",
			"--peers", strconv.Itoa(n), "--profile", "lan", "--trials", strconv.Itoa(m.BulletinTrials),
			"--timeout", (meshbenchWithin - 10*time.Second).String()); err != nil {
			return notMeasured(fmt.Sprintf("bulletin propagation at %d peers: %v", n, err))
		}
		r.What = fmt.Sprintf("%d mesh nodes in one process on 127.0.0.1 (lan profile); node 0 owns %d workers and flips one's "+
			"health per trial; from its Publish until each other node's bulletin receiver has the new health", n, r.Workers)
		runs = append(runs, r)
	}
	return runs
}

// runBulletinBytes measures the bulletin traffic of an owner of m.BulletinWorkers workers.
func runBulletinBytes(ctx context.Context, ps *procs, o *Options, m *MeshOptions) any {
	o.Log.Info("mesh: bulletin bytes", "workers", m.BulletinWorkers, "window", m.BulletinWindow)
	var r BulletinBytes
	if err := runMeshbench(ctx, ps, m, "meshbench-bulletin-bytes", bulletinBytesWithin, &r, "bulletin-bytes",
		"--peers", "3", "--profile", "lan", "--workers", strconv.Itoa(m.BulletinWorkers),
		"--window", m.BulletinWindow.String(), "--settle", m.BulletinSettle.String(),
		"--timeout", (bulletinBytesWithin - 10*time.Second).String()); err != nil {
		return notMeasured(fmt.Sprintf("bulletin bytes: %v", err))
	}
	r.What = fmt.Sprintf("%d mesh nodes in one process on 127.0.0.1 (lan profile); node 0 publishes %d workers; "+
		"meshgw_mesh_bulletin_bytes_total per second of node 0 and node 1, %g s without changes, then %g s at %g changes/s",
		r.Peers, r.Workers, r.WindowS, r.WindowS, r.ChurnPerS)
	return r
}

// bulletinGoals are the propagation goal, judged only with runs at 3 and at 100 or more peers
// on the lan profile, and the traffic for scale.
func bulletinGoals(v MeshResult) []Goal {
	var gs []Goal
	if runs, ok := v.BulletinPropagation.([]BulletinPropagation); ok && len(runs) > 0 {
		var parts []string
		small, large, under := false, false, true
		for _, r := range runs {
			parts = append(parts, fmt.Sprintf("%d peers: p99 %.0f ms (p50 %.0f, max %.0f, %d lost of %d)", r.Peers, r.P99Ms, r.P50Ms, r.MaxMs, r.Lost, r.Pairs))
			small = small || r.Peers == 3 && r.Profile == "lan"
			large = large || r.Peers >= goalBulletinPeers && r.Profile == "lan"
			under = under && r.P99Ms < goalBulletinP99Ms
		}
		g := Goal{"bulletin propagation p99 < 1 s (lan, 3 and 100 peers)", strings.Join(parts, "; "),
			fmt.Sprintf("< %.0f s", goalBulletinP99Ms/1000), nil}
		if small && large { // a quick run's 3 peers alone say nothing of 100
			g.Met = met(under)
		}
		gs = append(gs, g)
	}
	if b, ok := v.BulletinBytes.(BulletinBytes); ok {
		gs = append(gs, Goal{fmt.Sprintf("bulletin bytes/s, %d workers, %d peers", b.Workers, b.Peers),
			fmt.Sprintf("owner %.0f steady, %.0f at %g changes/s; a peer %.0f and %.0f", b.Steady.OwnerBytesPerS,
				b.Churn.OwnerBytesPerS, b.ChurnPerS, b.Steady.PeerBytesPerS, b.Churn.PeerBytesPerS), "", nil})
	}
	return gs
}
