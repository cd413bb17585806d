// Command harness runs meshgw's benchmark (make bench): meshgw against a direct connection and
// HAProxy, interleaved, and writes the JSON report and prints the table.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshgw/meshgw/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, report, err := parseFlags(args, stderr)
	if err != nil {
		return 2
	}
	dir, err := os.MkdirTemp("", "meshgw-bench-")
	if err != nil {
		fmt.Fprintln(stderr, "harness:", err)
		return 1
	}
	o.WorkDir = dir
	rep, err := bench.Run(ctx, o)
	if ctx.Err() != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(stderr, "harness: interrupted; every process it started is stopped")
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "harness: %v\n(process logs kept in %s)\n", err, dir)
		return 1
	}
	os.RemoveAll(dir)
	if err := writeReport(report, rep); err != nil {
		fmt.Fprintln(stderr, "harness:", err)
		return 1
	}
	rep.PrintTable(stdout)
	fmt.Fprintf(stdout, "\nreport written to %s\n", report)
	return 0
}

// quickRoutingPolicies are a quick run's routing rows: the two issue 28's targets compare, so
// that make bench-quick (and make test) run cache_aware, in half the time of the four.
const quickRoutingPolicies = "round_robin,cache_aware"

// parseFlags returns the run's options and the report path; quick (-quick or BENCH_QUICK=1)
// shortens every duration that was not set.
func parseFlags(args []string, stderr io.Writer) (bench.Options, string, error) {
	fs := flag.NewFlagSet("harness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o bench.Options
	var ho bench.HealthOptions
	report := fs.String("report", envOr("REPORT", "bench/out/report.json"), "path of the JSON report ($REPORT)")
	quick := fs.Bool("quick", os.Getenv("BENCH_QUICK") == "1", "short run, under a minute ($BENCH_QUICK=1)")
	health := fs.Bool("health", true, "measure the health checker at 10,000 workers")
	control := fs.Bool("control", true, "measure raft write latency and a gateway restoring many workers (memory, start time)")
	var co bench.ControlOptions
	mesh := fs.Bool("mesh", true, "measure membership convergence of 100 mesh peers (lan and local profiles), bulletin propagation and traffic, and ownership failover after kill -9")
	var mo bench.MeshOptions
	routing := fs.Bool("routing", true, "measure routing quality: multi-turn sessions sharing long system prompts, sprayed over 1, 3 and 5 gateways, against fake engines with prefix caches and slots")
	var ro bench.RoutingOptions
	cachesync := fs.Bool("cachesync", true, "measure the fleet-wide cache index: propagation at 5 gateways of 8 KiB multi-turn prompts, and its bytes per request")
	var cso bench.CacheSyncOptions
	fs.IntVar(&cso.Requests, "cachesync-requests", 0, "cachesync section: turns timed (default 400; quick 100)")
	wanOn := fs.Bool("wan", true, "measure 3 regions over simulated WAN links (network namespaces; needs root, else reported not measured): locality, fleet-acknowledged writes, propagation, failover")
	var wo bench.WANOptions
	fs.DurationVar(&wo.Delay, "wan-delay", 0, "wan section: one-way delay between two regions (default 50ms)")
	fs.IntVar(&wo.Requests, "wan-requests", 0, "wan section: chats of the run with local workers healthy (default 1,000)")
	fs.IntVar(&wo.SpillRequests, "wan-spill-requests", 0, "wan section: chats of each run with local workers disabled (default 1,000; quick 300)")
	fs.IntVar(&wo.Writes, "wan-writes", 0, "wan section: fleet-acknowledged disables timed through each of two regions, twice: quiet and under load (default 50; quick 10)")
	fs.IntVar(&wo.Trials, "wan-trials", 0, "wan section: health flips and prompts of the propagation runs (default 10; quick 3)")
	wanFailover := fs.Bool("wan-failover", true, "wan section: measure the failover of a killed region's owner (about 50 s; off in a quick run unless given)")
	fs.StringVar(&ro.FakeworkerBin, "fakeworker", "bin/fakeworker", "fake engine binary of the routing section")
	routingPolicies := fs.String("routing-policies", "", "routing section: comma-separated policies, each optionally followed by its own meshgw flags, e.g. 'prefix_hash,cache_aware --cache-scope local' (default "+bench.DefaultRoutingPolicies+"; quick "+quickRoutingPolicies+")")
	routingGateways := fs.String("routing-gateways", "", "routing section: comma-separated gateway counts (default 1,3,5; quick 1,3)")
	routingFlags := fs.String("routing-gateway-flags", "", "routing section: more meshgw flags for every gateway, space-separated")
	fs.IntVar(&ro.Engines, "routing-engines", 0, "routing section: fake engines (default 8)")
	fs.IntVar(&ro.Workload.Sessions, "routing-sessions", 0, "routing section: sessions (default 300; quick 40)")
	fs.IntVar(&ro.Workload.Turns, "routing-turns", 0, "routing section: turns per session (default 6; quick 3)")
	fs.IntVar(&ro.InFlight, "routing-in-flight", 0, "routing section: sessions in flight (default 96; quick 16)")
	fs.Float64Var(&ro.OpenLoopRate, "routing-open-loop-rate", 0, fmt.Sprintf("routing section: after the closed loop, round_robin and cache_aware at the largest gateway count as an open loop, the sessions starting at this rate per second; 0 = none (default %d; quick 0)", bench.DefaultOpenLoopRate))
	lanes := fs.Int("routing-prefill-lanes", 1, "routing section: prefills each engine computes at once, 1 as on one GPU (fakeworker --prefill-lanes; 0: every admitted request at once, the model before 7 December 2026)")
	fs.BoolVar(&ro.CacheAnswers, "routing-cache-answers", false, "routing section: engines also cache each finished answer after its prompt, as SGLang and vLLM do (fakeworker --cache-answers)")
	profile := fs.Bool("profile", true, "after the measured rounds, take meshgw CPU profiles under load (needs --enable-pprof; off in a quick run)")
	fs.BoolVar(&o.NoProxy, "no-proxy", false, "skip the non-streaming section")
	fs.BoolVar(&o.NoStream, "no-stream", false, "skip the streaming section")
	verbose := fs.Bool("v", false, "debug logs")
	fs.StringVar(&o.WrkBin, "wrk", "wrk", "wrk binary")
	fs.StringVar(&o.HAProxyBin, "haproxy", "haproxy", "haproxy binary")
	fs.StringVar(&o.MeshgwBin, "meshgw", "bin/meshgw", "meshgw binary")
	fs.StringVar(&o.UpstreamBin, "upstream", "bin/bench-upstream", "bench upstream binary")
	fs.StringVar(&o.MinproxyBin, "minproxy", "bin/bench-minproxy", "reference fasthttp proxy binary")
	fs.BoolVar(&o.NoMinproxy, "no-minproxy", false, "leave out the reference fasthttp proxy")
	fs.StringVar(&ho.Bin, "healthprobe", "bin/bench-healthprobe", "bench health-probe binary")
	fs.IntVar(&o.Rounds, "rounds", 0, "interleaved rounds of the plain rows (default 15; quick 1)")
	fs.DurationVar(&o.Duration, "duration", 0, "each wrk run (default 2s; quick 3s)")
	fs.DurationVar(&o.OneConnDuration, "one-conn-duration", 0, "each one-connection latency run (default 1s; quick 1s)")
	fs.IntVar(&o.StreamRounds, "stream-rounds", 0, "interleaved rounds of the streaming rows (default 5; quick 1)")
	fs.DurationVar(&o.StreamDuration, "stream-duration", 0, "each streaming load (default 10s; quick 2s)")
	fs.IntVar(&o.Connections, "connections", 64, "wrk -c")
	fs.IntVar(&o.Threads, "threads", 2, "wrk -t")
	fs.IntVar(&o.Streams, "streams", 32, "concurrent streams")
	fs.IntVar(&o.StreamEvents, "events", 20, "SSE events per stream")
	fs.BoolVar(&o.MetricsOff, "metrics-off", false, "start meshgw without its Prometheus listener")
	fs.StringVar(&o.RequestLog, "request-log", "", "force meshgw's request log on or off (default: meshgw's default, at --log-level info)")
	fs.StringVar(&o.Policy, "policy", "", "meshgw's --policy in the proxy and stream rows (default round_robin, as minproxy and HAProxy route)")
	fs.IntVar(&ho.Workers, "health-workers", 10_000, "workers the health checker probes")
	fs.DurationVar(&ho.Duration, "health-duration", 0, "measured window of the health section (default 10s; quick 2s)")
	fs.StringVar(&co.RaftbenchBin, "raftbench", "bin/bench-raftbench", "bench raft tool binary")
	fs.StringVar(&mo.Bin, "meshbench", "bin/bench-meshbench", "bench mesh tool binary")
	fs.IntVar(&mo.Peers, "mesh-peers", 0, "mesh peers of the convergence runs (default 100; quick 30)")
	fs.IntVar(&mo.FailoverWorkers, "failover-workers", 0, "workers the killed owner holds in the failover runs (default 100; quick 20)")
	fs.IntVar(&mo.FailoverRuns, "failover-runs", 0, "failover runs, each with 3 fresh gateways (default 3; quick 1)")
	fs.IntVar(&mo.BulletinTrials, "bulletin-trials", 0, "health changes timed per bulletin propagation run (default 50; quick 20)")
	fs.IntVar(&mo.BulletinWorkers, "bulletin-workers", 0, "workers the owner publishes in the bulletin traffic run (default 10,000; quick 1,000)")
	fs.DurationVar(&mo.BulletinWindow, "bulletin-window", 0, "each window of the bulletin traffic run, steady then churn (default 30s; quick 3s)")
	fs.IntVar(&co.Workers, "memory-workers", 0, "imported workers the memory section restores (default 100,000; quick 10,000)")
	fs.IntVar(&co.Registrations, "registrations", 0, "sequential registrations timed at 1,000 and at --memory-workers records (default 300; quick 100)")
	fs.IntVar(&co.AdminWrites, "admin-writes", 0, "sequential admin writes timed (default 1,000; quick 100)")
	raft := fs.Bool("raft", true, "with -control: measure raft write latency")
	records := fs.Bool("memory-records", true, "with -control: measure a gateway restoring many worker records")
	fs.IntVar(&co.Uploads, "uploads", 20, "with -control: concurrent uploads posted through meshgw, its RSS measured (0 skips)")
	fs.IntVar(&co.UploadMiB, "upload-mib", 100, "MiB of each upload (quick 20)")
	budgets := fs.String("upload-budgets", "0,64,256,4096", "--max-buffered-body-mb of each upload run, comma-separated (0: meshgw's default; quick 200)")
	if err := fs.Parse(args); err != nil {
		return o, "", err
	}
	if o.RequestLog != "" && o.RequestLog != "on" && o.RequestLog != "off" {
		fmt.Fprintf(stderr, "harness: -request-log %q: want on or off\n", o.RequestLog)
		return o, "", errors.New("bad -request-log")
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	o.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	o.Quick = *quick
	co.NoRaft, co.NoRecords = !*raft, !*records
	if co.Uploads == 0 {
		co.Uploads = -1 // setDefaults would make 0 the default
	}
	var err error
	if co.UploadBudgetsMiB, err = intList(*budgets); err != nil {
		fmt.Fprintf(stderr, "harness: -upload-budgets: %v\n", err)
		return o, "", err
	}
	if *quick {
		// A fifth of the full run's bytes, shaped as it is with the default budget: half the
		// uploads fit in the budget at once.
		if !given(fs, "upload-mib") {
			co.UploadMiB = 20
		}
		if !given(fs, "upload-budgets") {
			co.UploadBudgetsMiB = []int{200}
		}
		o.Rounds = or(o.Rounds, 1)
		o.StreamRounds = or(o.StreamRounds, 1)
		o.Duration = orDur(o.Duration, 3*time.Second)
		o.OneConnDuration = orDur(o.OneConnDuration, time.Second)
		o.StreamDuration = orDur(o.StreamDuration, 2*time.Second)
		ho.Duration = orDur(ho.Duration, 2*time.Second)
		ho.Warmup = 2 * time.Second // two probes at 1 s make every worker ready
		co.Workers = or(co.Workers, 10_000)
		co.Registrations = or(co.Registrations, 100)
		co.AdminWrites = or(co.AdminWrites, 100)
		co.ClusterWrites = 200
		co.Starts = 1
		mo.Peers = or(mo.Peers, 30)
		mo.Runs = 1
		mo.FailoverWorkers = or(mo.FailoverWorkers, 20)
		mo.FailoverRuns = or(mo.FailoverRuns, 1)
		mo.BulletinPeers = []int{3} // 100 peers take about 25 s
		mo.BulletinTrials = or(mo.BulletinTrials, 20)
		mo.BulletinWorkers = or(mo.BulletinWorkers, 1_000)
		mo.BulletinWindow = orDur(mo.BulletinWindow, 3*time.Second)
		mo.BulletinSettle = 3 * time.Second
		cso.Requests = or(cso.Requests, 100)
		wo.SpillRequests = or(wo.SpillRequests, 300)
		wo.Writes = or(wo.Writes, 10)
		wo.Trials = or(wo.Trials, 3)
	}
	if *routingGateways != "" {
		if ro.Gateways, err = intList(*routingGateways); err == nil && slices.Contains(ro.Gateways, 0) {
			err = errors.New("a gateway count must be at least 1")
		}
		if err != nil {
			fmt.Fprintf(stderr, "harness: -routing-gateways: %v\n", err)
			return o, "", err
		}
	}
	if *routingPolicies == "" {
		*routingPolicies = bench.DefaultRoutingPolicies
		if *quick {
			*routingPolicies = quickRoutingPolicies
		}
	}
	for _, p := range strings.Split(*routingPolicies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			ro.Policies = append(ro.Policies, p)
		}
	}
	ro.GatewayFlags = strings.Fields(*routingFlags)
	switch {
	case *lanes < 0:
		fmt.Fprintf(stderr, "harness: -routing-prefill-lanes %d: want a count of lanes, or 0 for every admitted request at once\n", *lanes)
		return o, "", errors.New("bad prefill lanes")
	case *lanes == 0:
		ro.PrefillLanes = -1 // RoutingOptions' zero is the default, one lane
	default:
		ro.PrefillLanes = *lanes
	}
	switch {
	case !given(fs, "routing-open-loop-rate"):
		ro.OpenLoopRate = bench.DefaultOpenLoopRate
		if *quick {
			ro.OpenLoopRate = 0
		}
	case ro.OpenLoopRate < 0 || math.IsNaN(ro.OpenLoopRate) || math.IsInf(ro.OpenLoopRate, 0):
		fmt.Fprintf(stderr, "harness: -routing-open-loop-rate %v: want a rate of sessions per second, or 0 for none\n", ro.OpenLoopRate)
		return o, "", errors.New("bad open loop rate")
	}
	if *quick {
		ro.Workload.Sessions = or(ro.Workload.Sessions, 40)
		ro.Workload.Turns = or(ro.Workload.Turns, 3)
		ro.InFlight = or(ro.InFlight, 16)
		if len(ro.Gateways) == 0 {
			ro.Gateways = []int{1, 3}
		}
	}
	if *routing {
		o.Routing = &ro
	}
	if *mesh {
		o.Mesh = &mo
	}
	if *cachesync {
		o.CacheSync = &cso
	}
	if wo.Delay < 0 || wo.Requests < 0 || wo.SpillRequests < 0 || wo.Writes < 0 || wo.Trials < 0 {
		fmt.Fprintln(stderr, "harness: -wan-delay, -wan-requests, -wan-spill-requests, -wan-writes and -wan-trials take no negative value")
		return o, "", errors.New("negative wan option")
	}
	if *wanOn {
		wo.FakeworkerBin = ro.FakeworkerBin
		wo.NoFailover = !*wanFailover || (*quick && !given(fs, "wan-failover"))
		o.WAN = &wo
	}
	if *control {
		o.Control = &co
	}
	if *health {
		o.Health = &ho
	}
	o.Profile = *profile && !*quick
	o.ProfileDir = filepath.Dir(*report)
	return o, *report, nil
}

func writeReport(path string, rep *bench.Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func orDur(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// intList parses comma-separated integers of at least 0.
func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a whole number of at least 0", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// given reports whether the flag name was on the command line.
func given(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}
