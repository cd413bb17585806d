// Command meshgw-chaos runs meshgw's chaos test across processes (test/chaos): N gateways and
// M fake engines under faults drawn from a seed, with client and admin workloads, then checks
// the invariants and writes a JSON report. As root with ip, iptables and nsenter it works in network
// namespaces it makes and removes itself; otherwise on the host's loopback without partitions.
// It exits 0 only when every invariant holds (1 when one broke, 2 on usage errors, 3 when the
// run could not proceed). With --regions N it runs over a simulated WAN of N regions instead
// (test/wan: a namespace per region, links delayed by --wan-delay), as root.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/test/chaos"
	"github.com/meshgw/meshgw/test/chaos/check"
	"github.com/meshgw/meshgw/test/chaos/cluster"
	"github.com/meshgw/meshgw/test/chaos/history"
	"github.com/meshgw/meshgw/test/wan"
)

// insideEnv carries the topology to the copy of the command that runs inside the hub namespace.
const insideEnv = "MESHGW_CHAOS_TOPOLOGY"

type options struct {
	seed           uint64
	duration, hold time.Duration
	nodes, engines int
	faults         string
	report, dir    string
	bin            string
	noIsolate      bool
	keep           bool
	check          string
	regions        int
	wanDelay       time.Duration
	cutHold        time.Duration
}

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	leakBase := goleak.IgnoreCurrent()
	var o options
	fs := pflag.NewFlagSet("meshgw-chaos", pflag.ContinueOnError)
	fs.Uint64Var(&o.seed, "seed", 1, "seed of every random choice (faults, targets, operations)")
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "how long faults are injected")
	fs.DurationVar(&o.hold, "hold", 3*time.Second, "sets the holds: drawn in [hold/3, hold/2], one in ten in [2×hold, 3×hold]")
	fs.IntVar(&o.nodes, "nodes", 3, "gateways")
	fs.IntVar(&o.engines, "engines", 3, "fake engines (with 3 or more, the last takes the weight updates)")
	fs.StringVar(&o.faults, "faults", "", "comma-separated fault kinds (default every kind): "+strings.Join(chaosKinds(), ", "))
	fs.StringVar(&o.report, "report", "", "write the JSON report to this path")
	fs.StringVar(&o.dir, "dir", "", "state directories and logs (default a new temporary folder, removed when every invariant holds)")
	fs.StringVar(&o.bin, "bin", "", "folder holding meshgw and fakeworker (default this command's own folder)")
	fs.BoolVar(&o.noIsolate, "no-isolate", false, "run on the host's loopback even as root (no partitions)")
	fs.BoolVar(&o.keep, "keep", false, "keep the folder of state directories and logs")
	fs.IntVar(&o.regions, "regions", 0, "run over a simulated WAN of this many regions (2-16; needs root): gateways and engines spread round-robin over them, partition-one cuts a whole region; 0 or 1: the plain network")
	fs.DurationVar(&o.wanDelay, "wan-delay", 50*time.Millisecond, "with --regions: the one-way delay of the links between regions")
	fs.DurationVar(&o.cutHold, "cut-hold", 0, "with --regions: how long every region cut holds (0: drawn like every fault's hold, see --hold)")
	fs.StringVar(&o.check, "check", "", "judge a saved history.json again (after a checker changed) instead of running")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "meshgw-chaos:", err)
		return 2
	}
	if o.nodes < 1 || o.engines < 1 || o.duration <= 0 || o.hold <= 0 {
		fmt.Fprintln(os.Stderr, "meshgw-chaos: --nodes and --engines must be ≥ 1, --duration and --hold > 0")
		return 2
	}
	switch {
	case o.regions < 0 || o.regions > 16:
		fmt.Fprintf(os.Stderr, "meshgw-chaos: --regions %d: want 2 to 16 regions, or 0 or 1 for the plain network\n", o.regions)
		return 2
	case o.wanDelay < 0 || o.cutHold < 0:
		fmt.Fprintln(os.Stderr, "meshgw-chaos: --wan-delay and --cut-hold must be ≥ 0")
		return 2
	case o.regions >= 2 && o.noIsolate:
		fmt.Fprintln(os.Stderr, "meshgw-chaos: --regions runs in network namespaces; it cannot be combined with --no-isolate")
		return 2
	}
	if o.check != "" {
		return recheck(o.check)
	}
	if o.bin == "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "meshgw-chaos:", err)
			return 3
		}
		o.bin = filepath.Dir(exe)
	}
	if env := os.Getenv(insideEnv); env != "" {
		return inside(o, env, leakBase)
	}
	if o.regions >= 2 {
		// The WAN's relay runs in this process, which stays in the host's namespace and dials
		// each region from inside it (chaos.Config.Regions).
		if ok, why := wan.Usable(); !ok {
			fmt.Fprintf(os.Stderr, "meshgw-chaos: --regions needs a simulated WAN, which cannot be made here: %s\n", why)
			return 3
		}
		return inside(o, "", leakBase)
	}
	if ok, why := cluster.Usable(); ok && !o.noIsolate {
		return outside(o, args)
	} else if !ok {
		fmt.Printf("meshgw-chaos: on the host's loopback, partition faults skipped (%s)\n", why)
	}
	return inside(o, "", leakBase)
}

func chaosKinds() []string { return chaos.Kinds() }

// outside makes the namespaces, runs this command again inside the hub, and removes the
// namespaces when it ends, Ctrl-C included.
func outside(o options, args []string) int {
	topo := cluster.Topology{Prefix: fmt.Sprintf("mgc%d", os.Getpid()), Nodes: o.nodes}
	if err := topo.Create(o.engines); err != nil {
		fmt.Fprintln(os.Stderr, "meshgw-chaos: network namespaces:", err)
		return 3
	}
	defer topo.Delete()
	fmt.Printf("meshgw-chaos: isolated in network namespaces %s-* (removed at the end)\n", topo.Prefix)
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "meshgw-chaos:", err)
		return 3
	}
	if o.bin != "" {
		args = append(args, "--bin", o.bin)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", topo.HubNS(), exe}, args...)...)
	cmd.Env = append(os.Environ(), insideEnv+"="+topo.Prefix+":"+strconv.Itoa(o.nodes))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "meshgw-chaos:", err)
		return 3
	}
	done := make(chan struct{})
	go func() {
		// The first signal asks the run to stop (it heals and cleans up); a second kills it.
		n := 0
		for {
			select {
			case <-done:
				return
			case sig := <-sigs:
				n++
				if n == 1 {
					_ = cmd.Process.Signal(sig)
				} else {
					_ = cmd.Process.Kill()
				}
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return 3
	}
	return 0
}

// inside runs the test; env is "prefix:nodes" of the namespaces it runs in, "" on the host.
func inside(o options, env string, leakBase goleak.Option) int {
	var topo *cluster.Topology
	if env != "" {
		prefix, n, _ := strings.Cut(env, ":")
		nodes, _ := strconv.Atoi(n)
		topo = &cluster.Topology{Prefix: prefix, Nodes: nodes}
	}
	dir, made := o.dir, false
	if dir == "" {
		d, err := os.MkdirTemp("", "meshgw-chaos-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "meshgw-chaos:", err)
			return 3
		}
		dir, made = d, true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var faults []string
	if o.faults != "" {
		faults = strings.Split(o.faults, ",")
	}
	rep, err := chaos.Run(ctx, chaos.Config{
		Seed: o.seed, Duration: o.duration, Hold: o.hold, Nodes: o.nodes, Engines: o.engines, Faults: faults,
		Meshgw: filepath.Join(o.bin, "meshgw"), Fakeworker: filepath.Join(o.bin, "fakeworker"),
		Dir: dir, Topology: topo, Out: os.Stdout, Regions: o.regions, WANDelay: o.wanDelay, CutHold: o.cutHold,
		LeakCheck: func() error {
			return goleak.Find(leakBase, goleak.IgnoreTopFunction("os/signal.NotifyContext.func1"))
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "meshgw-chaos: %v (logs in %s)\n", err, dir)
		return 3
	}
	rep.Print(os.Stdout)
	if o.report != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(o.report, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "meshgw-chaos:", err)
			return 3
		}
	}
	if !rep.OK() {
		fmt.Printf("meshgw-chaos: an invariant broke; state directories and logs kept in %s\n", dir)
		return 1
	}
	if made && !o.keep {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Printf("meshgw-chaos: state directories and logs in %s\n", dir)
	}
	return 0
}

// recheck judges a saved history again and prints the verdicts; 0 when all hold.
func recheck(path string) int {
	raw, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "meshgw-chaos:", err)
		return 3
	}
	var h history.History
	if err := json.Unmarshal(raw, &h); err != nil {
		fmt.Fprintf(os.Stderr, "meshgw-chaos: %s: %v\n", path, err)
		return 3
	}
	gateways := make([]string, 0, len(h.Final))
	for g := range h.Final {
		gateways = append(gateways, g)
	}
	sort.Strings(gateways)
	rep := chaos.Report{Invariants: chaos.Check(h, gateways, chaos.Config{}), Requests: check.CountRequests(h),
		LostByCause: chaos.LostByCause(h)}
	rep.Print(os.Stdout)
	if !rep.OK() {
		return 1
	}
	return 0
}
