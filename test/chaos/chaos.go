// Package chaos runs meshgw's chaos test across processes: it starts a cluster of gateways and
// fake engines, drives client and admin workloads through every gateway while a nemesis
// injects faults drawn from a seed, then heals, reads the final state and checks the
// invariants of DESIGN.md section 14 into a Report.
package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshgw/meshgw/test/chaos/check"
	"github.com/meshgw/meshgw/test/chaos/cluster"
	"github.com/meshgw/meshgw/test/chaos/history"
	"github.com/meshgw/meshgw/test/chaos/nemesis"
	"github.com/meshgw/meshgw/test/chaos/workload"
)

// Config is a run.
type Config struct {
	Seed                uint64
	Duration            time.Duration
	Nodes, Engines      int
	Faults              []string // kinds; empty means every kind
	Meshgw, Fakeworker  string   // binaries
	Dir                 string   // state directories and logs
	Topology            *cluster.Topology
	Out                 io.Writer     // progress lines and the summary
	Progress            time.Duration // between progress lines (5 s when 0)
	Hold                time.Duration // sets the holds: usual ones in [Hold/3, Hold/2], one in ten in [2×Hold, 3×Hold] (3 s when 0)
	MinServed           float64       // fail_static's bound (0.95 when 0)
	OwnerBound          time.Duration // owner_within_bound's bound past the grace (20 s when 0; wanOwnerBound over a WAN)
	Grace               time.Duration // --owner-failover-grace-secs (3 s when 0)
	LeakCheck           func() error  // no_goroutine_leak; nil skips it
	LinearizableTimeout time.Duration // Porcupine's budget (2 min when 0)
	// Regions, at 2 or more, runs over a simulated WAN (test/wan) of that many regions, whose
	// links delay every packet WANDelay one way: the gateways and engines spread round-robin
	// over them (cluster.Layout), partition-one cuts a whole region, and each cut is measured
	// (RegionCut). It needs root; Topology is then unused.
	Regions  int
	WANDelay time.Duration
	// CutHold, when > 0, is how long every region cut holds (else the nemesis's drawn hold).
	CutHold time.Duration
}

func (c *Config) defaults() {
	if c.Progress == 0 {
		c.Progress = 5 * time.Second
	}
	if c.Hold == 0 {
		c.Hold = 3 * time.Second
	}
	if c.MinServed == 0 {
		c.MinServed = 0.95
	}
	if c.OwnerBound == 0 && c.Regions >= 2 {
		c.OwnerBound = wanOwnerBound
	}
	if c.OwnerBound == 0 {
		c.OwnerBound = 20 * time.Second
	}
	if c.Grace == 0 {
		c.Grace = 3 * time.Second
	}
	if c.LinearizableTimeout == 0 {
		c.LinearizableTimeout = 2 * time.Minute
	}
	if len(c.Faults) == 0 {
		c.Faults = nemesis.All
	}
}

// wanOwnerBound is owner_within_bound's bound over a simulated WAN: the gateways run
// --mesh-profile wan, memberlist's WAN timings, under which a gateway cut off is declared dead
// (and its workers failed over) about 30 s after it went silent on 3 gateways (a 5 s probe
// interval, then a suspicion of 6 × log10(n) probe intervals), against 2 to 4 s with the local
// profile. A region cut of 30 s ends about when the failover begins.
const wanOwnerBound = 45 * time.Second

// adminClients is how many admin clients run side by side.
const adminClients = 5

// Run runs the test and returns its report; an error means the run itself could not proceed
// (a cluster that never formed), not that an invariant broke.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg.defaults()
	rep := Report{Seed: cfg.Seed, Nodes: cfg.Nodes, Engines: cfg.Engines, Isolated: cfg.Topology != nil}
	logf := func(format string, args ...any) { fmt.Fprintf(cfg.Out, format+"\n", args...) }
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6d657368))
	bed, closeBed, err := startWAN(cfg)
	if err != nil {
		return rep, err
	}
	defer closeBed()
	topo := cfg.Topology
	if bed != nil {
		topo = nil
		rep.Isolated, rep.Regions, rep.WANDelayMs = true, bed.Regions, float64(cfg.WANDelay.Microseconds())/1000
		logf("chaos: over a simulated WAN: regions %s (namespaces %s...), %v one way between regions",
			strings.Join(bed.Regions, ","), bed.Net.Namespace(0), cfg.WANDelay)
	}
	c, err := cluster.New(cluster.Config{Meshgw: cfg.Meshgw, Fakeworker: cfg.Fakeworker, Nodes: cfg.Nodes,
		Engines: cfg.Engines, Dir: cfg.Dir, Topology: topo, WAN: bed, Grace: cfg.Grace})
	if err != nil {
		return rep, err
	}
	defer c.Close()
	logf("chaos: starting %d gateways and %d engines in %s", cfg.Nodes, cfg.Engines, cfg.Dir)
	for _, n := range c.Nodes {
		if n.Region != "" {
			logf("chaos: %s in region %s at %s", n.ID, n.Region, n.Host)
		}
	}
	if err := c.Start(ctx); err != nil {
		return rep, fmt.Errorf("the cluster did not form: %w", err)
	}
	rec := history.NewRecorder()
	logf("chaos: the run's clock (the times of the nemesis lines) starts at %s", time.Now().UTC().Format("15:04:05.000"))
	admin := &workload.Admin{Rec: rec, Key: cluster.AdminKey, Client: workload.AdminClient()}
	gateways := make([]workload.Gateway, len(c.Nodes))
	for i, n := range c.Nodes {
		gateways[i] = workload.Gateway{ID: n.ID, URL: n.URL()}
	}
	flags, weight, probed := plan(c, rec)
	for i, e := range c.Engines {
		w := engineWorker(e)
		// Through a gateway of its region, when it has one (the workload names the region too).
		g := gateways[i%len(gateways)]
		if k := slices.IndexFunc(c.Nodes, func(n *cluster.Node) bool { return n.Region != "" && n.Region == e.Region }); k >= 0 {
			g = gateways[k]
		}
		if op := admin.Do(ctx, 0, history.Register, w, g); op.Outcome != history.OK {
			return rep, fmt.Errorf("register %s through %s: %d %s", w.URL, g.ID, op.Status, op.Code)
		}
	}

	nem := &nemesis.Nemesis{C: c, Rec: rec, Rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), Log: logf, Hold: cfg.Hold, Stop: ctx}
	var cuts *cutWatch
	switch {
	case bed != nil:
		nem.Regions, nem.CutHold = bed.Net, cfg.CutHold
		cuts = &cutWatch{ctx: ctx, c: c, admin: admin, rec: rec, target: flags[0], workers: append(flags, weightList(weight)...)}
		nem.OnCut = cuts.onCut
	case cfg.Topology != nil:
		nem.Net = &cluster.Net{}
	}
	if weight != nil {
		nem.WeightEngine = c.Engines[len(c.Engines)-1].URL()
	}
	kinds := nem.Plan(cfg.Faults)
	for k, why := range nem.Skipped() {
		logf("chaos: skipping %s: %s", k, why)
	}

	work, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	spawn := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	for _, g := range gateways {
		spawn(func() { workload.Requests(work, rec, g, false) })
		spawn(func() { workload.Requests(work, rec, g, true) })
	}
	for i := range adminClients {
		r := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		spawn(func() { workload.Operations(work, admin, i+1, r, flags, gateways) })
	}
	if weight != nil {
		r := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		spawn(func() { workload.Weights(work, admin, 9, r, *weight, gateways) })
	}
	spawn(func() { workload.Sample(work, rec, cluster.AdminKey, gateways, probed, time.Second) })
	spawn(func() { progress(work, cfg, c, nem, rec, logf) })

	faults, endFaults := context.WithTimeout(ctx, cfg.Duration)
	nem.Run(faults, kinds)
	endFaults()
	stop()
	wg.Wait()
	logf("chaos: faults over after %v; healing and reading the final state", rec.Now().Round(time.Second))

	// Interrupted (ctx ended), the waits for the cluster to heal end at once.
	healErrs := final(ctx, c, admin, rec, gateways, append(flags, weightList(weight)...))
	if cuts != nil {
		cuts.wait()
	}
	for _, e := range healErrs {
		logf("chaos: %s", e)
	}
	h := rec.Snapshot()
	if err := writeHistory(filepath.Join(cfg.Dir, "history.json"), h); err != nil {
		logf("chaos: %v", err)
	}
	rep.DurationS = cfg.Duration.Seconds()
	rep.Interrupted = ctx.Err() != nil
	rep.Faults, rep.Skipped, rep.Errors = nem.Counts(), nem.Skipped(), append(nem.Errors(), healErrs...)
	rep.Refused = nem.Refused()
	rep.FaultSeconds, rep.BackSeconds, rep.WaitSeconds, rep.TurnSeconds = nem.Seconds()
	rep.Requests = check.CountRequests(h)
	rep.LostByCause = LostByCause(h)
	rep.AdminOps = map[string]int{}
	for _, a := range h.Admin {
		rep.AdminOps[string(a.Kind)+"_"+string(a.Outcome)]++
	}
	ids := make([]string, len(gateways))
	for i, g := range gateways {
		ids[i] = g.ID
	}
	rep.Invariants = Check(h, ids, cfg)
	rep.Invariants["faults_healed"] = healed(rep.Errors)
	if cuts != nil {
		regions := map[string]string{}
		for _, e := range c.Engines {
			regions[engineWorker(e).ID] = e.Region
		}
		rep.RegionCuts = cuts.measureCuts(h, regions)
	}
	c.Close()
	closeBed()
	rep.Invariants["no_goroutine_leak"] = leaks(cfg.LeakCheck)
	return rep, nil
}

// Check judges a history against the invariants a history shows (all but no_goroutine_leak
// and faults_healed, which only a live run can judge). gateways names the gateways that must
// list their records at the end. meshgw-chaos --check runs it on a saved history.json.
func Check(h history.History, gateways []string, cfg Config) map[string]check.Result {
	if cfg.OwnerBound == 0 && len(h.Cuts) > 0 {
		cfg.OwnerBound = wanOwnerBound // a saved history of a run over a WAN (--check)
	}
	cfg.defaults()
	losses := check.Losses(h, cluster.RequestTimeout)
	return map[string]check.Result{
		"no_gateway_fault":    check.NoGatewayFault(losses),
		"hang_losses":         check.HangLosses(h, losses),
		"linearizable":        check.Linearizable(h, cfg.LinearizableTimeout),
		"no_lost_ack":         check.NoLostAck(h, gateways),
		"no_disabled_routing": check.NoDisabledRouting(h),
		"single_owner":        check.SingleOwner(h),
		"owner_within_bound":  check.OwnerWithinBound(h, cfg.Grace, cfg.OwnerBound),
		"fail_static":         check.FailStatic(h, cfg.MinServed),
	}
}

// LostByCause counts the history's lost requests by cause (check.Losses).
func LostByCause(h history.History) map[string]int {
	out := check.LostByCause(check.Losses(h, cluster.RequestTimeout))
	if len(h.Cuts) > 0 {
		out[check.CauseRegionCut] += 0 // listed at zero in a run that cut regions
	}
	return out
}

// plan sets the engines' roles: the last engine (with 3 or more) takes the weight updates, the
// others and two records with no engine behind them take the flag writes. It returns the
// flag workers, the weight worker (nil without one) and the engines whose probes are sampled.
func plan(c *cluster.Cluster, rec *history.Recorder) (flags []workload.Worker, weight *workload.Worker, probed map[string]string) {
	probed = map[string]string{}
	for i, e := range c.Engines {
		w := engineWorker(e)
		probed[w.ID] = e.URL()
		if i == len(c.Engines)-1 && len(c.Engines) >= 3 {
			weight = &w
			rec.WeightWorker(w.ID)
			continue
		}
		flags = append(flags, w)
	}
	// Records only: registered by the workload at random, so that existence is tested too. The
	// hub's port 9 (discard) has no listener.
	host := c.Engines[0].Host
	for _, port := range []int{9, 19} {
		w := workload.NewWorker(fmt.Sprintf("http://%s:%d", host, port))
		w.Region = c.Engines[0].Region
		flags = append(flags, w)
	}
	return flags, weight, probed
}

// engineWorker is e's worker record, in e's region over a WAN.
func engineWorker(e *cluster.Engine) workload.Worker {
	w := workload.NewWorker(e.URL())
	w.Region = e.Region
	return w
}

func weightList(w *workload.Worker) []workload.Worker {
	if w == nil {
		return nil
	}
	return []workload.Worker{*w}
}

func healed(errs []string) check.Result {
	if len(errs) > 0 {
		return check.Fail("%d faults did not heal: %s", len(errs), errs[0])
	}
	return check.Pass("the cluster formed again after every fault")
}

func leaks(f func() error) check.Result {
	if f == nil {
		return check.Skip("no leak check configured")
	}
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
	if err := f(); err != nil {
		return check.Fail("%v", err)
	}
	return check.Pass("no goroutine of the harness outlived the run (goleak)")
}

// progress prints a line every cfg.Progress: faults so far in all and by kind, the gateways
// faults hold now, requests, admin operations, and the leader.
func progress(ctx context.Context, cfg Config, c *cluster.Cluster, nem *nemesis.Nemesis, rec *history.Recorder, logf func(string, ...any)) {
	t := time.NewTicker(cfg.Progress)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		counts := nem.Counts()
		faults, kinds := 0, ""
		for _, k := range sortedKeys(counts) {
			faults += counts[k]
			kinds += fmt.Sprintf(" %s=%d", k, counts[k])
		}
		held := nem.Held()
		holding := "none"
		if len(held) > 0 {
			var parts []string
			for _, g := range sortedKeys(held) {
				parts = append(parts, g+":"+held[g])
			}
			holding = strings.Join(parts, ",")
		}
		ops, reqs := rec.Counts()
		leader := c.Leader()
		if leader == "" {
			leader = "none"
		}
		logf("chaos: %3.0fs faults=%d (%s) held=%s requests ok=%d no_worker=%d gateway=%d admin=%d leader=%s",
			rec.Now().Seconds(), faults, strings.TrimSpace(kinds), holding, reqs[history.Served], reqs[history.NoWorker], reqs[history.GatewayLost], ops, leader)
	}
}

// writeHistory saves the whole history beside the logs, for reading a failure.
func writeHistory(path string, h history.History) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
