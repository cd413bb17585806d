package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// MeshOptions configure the mesh section: how fast the membership of many gateways converges.
type MeshOptions struct {
	Bin   string // default "bin/bench-meshbench"
	Peers int    // mesh nodes per run; default 100
	Runs  int    // runs per profile, each with fresh nodes; default 3
	// FailoverWorkers is the number of workers the killed owner holds in the failover runs;
	// default 100.
	FailoverWorkers int
	// FailoverRuns is the number of failover runs, each with fresh gateways; default 3.
	FailoverRuns int
	// FailoverGrace is the gateways' --owner-failover-grace-secs; default 3 s.
	FailoverGrace time.Duration
	// BulletinPeers are the mesh sizes of the bulletin propagation runs; default 3 and 100.
	BulletinPeers []int
	// BulletinTrials is the number of health changes timed per propagation run; default 50.
	BulletinTrials int
	// BulletinWorkers is the number of workers the owner publishes in the traffic run;
	// default 10,000.
	BulletinWorkers int
	// BulletinWindow is each measured window of the traffic run (steady, then churn); default
	// 30 s. BulletinSettle is the pause before them; default 15 s.
	BulletinWindow, BulletinSettle time.Duration
}

func (m *MeshOptions) setDefaults() {
	if m.Bin == "" {
		m.Bin = "bin/bench-meshbench"
	}
	m.Peers = cmp0(m.Peers, 100)
	m.Runs = cmp0(m.Runs, 3)
	m.FailoverWorkers = cmp0(m.FailoverWorkers, 100)
	m.FailoverRuns = cmp0(m.FailoverRuns, 3)
	if m.FailoverGrace <= 0 {
		m.FailoverGrace = 3 * time.Second
	}
	if len(m.BulletinPeers) == 0 {
		m.BulletinPeers = []int{3, 100}
	}
	m.BulletinTrials = cmp0(m.BulletinTrials, 50)
	m.BulletinWorkers = cmp0(m.BulletinWorkers, 10_000)
	if m.BulletinWindow <= 0 {
		m.BulletinWindow = 30 * time.Second
	}
	if m.BulletinSettle <= 0 {
		m.BulletinSettle = 15 * time.Second
	}
}

// MeshResult is the mesh section.
type MeshResult struct {
	Status string `json:"status"` // "measured"
	// LAN and Local are `meshbench converge` with the lan profile (the gateway's default) and
	// the local one (peers on one host).
	LAN   *MeshConvergence `json:"converge_lan"`
	Local *MeshConvergence `json:"converge_local"`
	// Failover is a FailoverResult, or NotMeasured with the reason its runs failed.
	Failover any `json:"failover"`
	// BulletinPropagation is `meshbench bulletins` at each of MeshOptions.BulletinPeers, a
	// []BulletinPropagation, or NotMeasured with the reason a run failed.
	BulletinPropagation any `json:"bulletin_propagation"`
	// BulletinBytes is `meshbench bulletin-bytes`, a BulletinBytes, or NotMeasured.
	BulletinBytes any `json:"bulletin_bytes"`
}

// MeshConvergence is what `meshbench converge` prints, and what it measured.
type MeshConvergence struct {
	Peers   int       `json:"peers"`
	Profile string    `json:"profile"`
	RunsS   []float64 `json:"runs_s"`
	MedianS float64   `json:"median_s"`
	MaxS    float64   `json:"max_s"`
	What    string    `json:"what"`
}

// meshbenchWithin bounds one meshbench invocation; it bounds itself with --timeout below it.
const meshbenchWithin = 90 * time.Second

// runMesh measures the mesh section: membership convergence with the lan and the local
// profile, bulletin propagation and traffic, then ownership failover. A failed convergence
// leaves the section not measured, another failure only its part, with the reason.
func runMesh(ctx context.Context, ps *procs, o *Options, m *MeshOptions) any {
	m.setDefaults()
	res := MeshResult{Status: "measured"}
	for _, p := range []struct {
		profile string
		into    **MeshConvergence
	}{{"lan", &res.LAN}, {"local", &res.Local}} {
		o.Log.Info("mesh: membership convergence", "peers", m.Peers, "profile", p.profile, "runs", m.Runs)
		var c MeshConvergence
		if err := runMeshbench(ctx, ps, m, "meshbench-"+p.profile, meshbenchWithin, &c, "converge", "--peers", strconv.Itoa(m.Peers),
			"--profile", p.profile, "--runs", strconv.Itoa(m.Runs), "--timeout", (meshbenchWithin - 10*time.Second).String()); err != nil {
			return notMeasured(fmt.Sprintf("convergence with the %s profile: %v", p.profile, err))
		}
		c.What = fmt.Sprintf("%d mesh nodes in one process on 127.0.0.1, all joining one seed at once; "+
			"from the first join until every node sees all %d alive", m.Peers, m.Peers)
		*p.into = &c
	}
	res.BulletinPropagation = runBulletins(ctx, ps, o, m)
	res.BulletinBytes = runBulletinBytes(ctx, ps, o, m)
	if f, err := runFailover(ctx, ps, o, m.FailoverWorkers, m.FailoverRuns, m.FailoverGrace); err != nil {
		res.Failover = notMeasured(fmt.Sprintf("failover: %v", err))
	} else {
		res.Failover = *f
	}
	return res
}

// runMeshbench runs bench-meshbench with args, killing it after within, and decodes the JSON it
// prints into v.
func runMeshbench(ctx context.Context, ps *procs, m *MeshOptions, name string, within time.Duration, v any, args ...string) error {
	var out bytes.Buffer
	p, err := ps.start(name, &out, m.Bin, args...)
	if err != nil {
		return err
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-p.Done():
	case <-timer.C:
		p.Kill()
		return fmt.Errorf("%s did not finish within %s", name, within)
	case <-ctx.Done():
		p.Kill()
		return ctx.Err()
	}
	if p.Err() != nil {
		return fmt.Errorf("%s failed: %v (see %s)", name, p.Err(), filepath.Join(ps.dir, name+".log"))
	}
	if err := json.Unmarshal(out.Bytes(), v); err != nil {
		return fmt.Errorf("%s printed %q: %v", name, out.String(), err)
	}
	return nil
}
