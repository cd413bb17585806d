// Package bench is meshgw's benchmark harness: it measures meshgw against a direct connection
// and HAProxy in one interleaved run (wrk for plain requests, its own client for SSE streams),
// and writes the JSON report and table of `make bench` (DESIGN.md section 15).
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/meshgw/meshgw/bench/engine"
	"github.com/meshgw/meshgw/test/loopport"
	"github.com/meshgw/meshgw/test/proc"
)

// Options configure a harness run. Zero fields take the defaults in their comments.
type Options struct {
	WrkBin      string // default "wrk"
	HAProxyBin  string // default "haproxy"
	MeshgwBin   string // default "bin/meshgw"
	UpstreamBin string // default "bin/bench-upstream"
	MinproxyBin string // default "bin/bench-minproxy"
	// NoMinproxy leaves out the reference fasthttp proxy (bench/cmd/minproxy).
	NoMinproxy bool

	// Rounds is how many interleaved rounds the plain rows run; default 15. Short rounds,
	// alternated, put less of the machine's drift between the two rates of a pair than long
	// ones (docs/performance.md, "Method").
	Rounds      int
	Duration    time.Duration // of each wrk run; default 2 s
	Threads     int           // wrk -t; default 2
	Connections int           // wrk -c; default 64
	// OneConnDuration is the length of the one-connection latency run; default 1 s.
	OneConnDuration time.Duration
	StreamRounds    int // interleaved rounds of the streaming load; default 5

	Streams        int           // concurrent streams; default 32
	StreamEvents   int           // events per stream; default 20
	StreamDuration time.Duration // of each streaming load; default 10 s
	PacedDelay     time.Duration // pause between events of the paced check; default 100 ms
	PacedEvents    int           // events per paced stream; default 10

	// NoProxy and NoStream skip those sections (and the proxies, when both are skipped).
	NoProxy, NoStream bool
	// MetricsOff starts meshgw without its Prometheus listener. Default: on, as deployed.
	MetricsOff bool
	// RequestLog forces meshgw's request log "on" or "off"; "" keeps meshgw's default.
	RequestLog string
	// Policy is meshgw's --policy in the proxy and stream rows; "" is round_robin.
	Policy string
	// Profile takes CPU profiles of meshgw under each load after the measured rounds, when
	// meshgw has --enable-pprof and its metrics listener is on; they go to ProfileDir.
	Profile    bool
	ProfileDir string
	// Quick marks the report as a short run (BENCH_QUICK=1) and skips the warm-up runs.
	Quick bool
	// Health configures the health-checker section; nil skips it.
	Health *HealthOptions
	// Control configures the raft and memory sections; nil skips them.
	Control *ControlOptions
	// Mesh configures the mesh section (membership convergence); nil skips it.
	Mesh *MeshOptions
	// Routing configures the routing-quality section; nil skips it.
	Routing *RoutingOptions
	// CacheSync configures the cachesync section (the fleet-wide cache index's propagation);
	// nil skips it.
	CacheSync *CacheSyncOptions
	// WAN configures the wan section (three regions over simulated WAN links, test/wan); nil
	// skips it. It needs root: elsewhere it is reported not measured, with the reason.
	WAN *WANOptions
	// WorkDir holds the generated configs and each process's stderr. Required.
	WorkDir string
	// Log receives progress. Default: slog.Default().
	Log *slog.Logger
}

func (o *Options) setDefaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.WrkBin, "wrk")
	def(&o.HAProxyBin, "haproxy")
	def(&o.MeshgwBin, "bin/meshgw")
	def(&o.UpstreamBin, "bin/bench-upstream")
	def(&o.MinproxyBin, "bin/bench-minproxy")
	o.Rounds = cmp0(o.Rounds, 15)
	o.StreamRounds = cmp0(o.StreamRounds, 5)
	o.Threads = cmp0(o.Threads, 2)
	o.Connections = cmp0(o.Connections, 64)
	o.Streams = cmp0(o.Streams, 32)
	o.StreamEvents = cmp0(o.StreamEvents, 20)
	o.PacedEvents = cmp0(o.PacedEvents, 10)
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{&o.Duration, 2 * time.Second}, {&o.OneConnDuration, time.Second}, {&o.StreamDuration, 10 * time.Second}, {&o.PacedDelay, 100 * time.Millisecond}} {
		if *d.p <= 0 {
			*d.p = d.v
		}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// target is one thing measured: an upstream directly, or a proxy in front of both.
type target struct {
	name     string
	url      string     // base URL, http://127.0.0.1:PORT
	proxy    *proc.Proc // nil for direct
	pprofURL string     // meshgw's pprof base URL, "" when not served
}

const chatPath = "/v1/chat/completions"

// Run starts two upstreams, HAProxy and meshgw on loopback, measures them, stops every process
// it started, and returns the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.setDefaults()
	if o.WorkDir == "" {
		return nil, errors.New("bench: Options.WorkDir is required")
	}
	ps := newProcs(o.Log, o.WorkDir)
	defer ps.Stop(3 * time.Second)
	rep := &Report{Date: time.Now().UTC().Format(time.RFC3339), Proxy: map[string]*ProxyTarget{}}
	rep.MachineDetail = probeMachine(ctx, o.HAProxyBin, o.WrkBin)
	rep.Machine = rep.MachineDetail.String()
	rep.Method = Method{Quick: o.Quick, Rounds: ranRounds(!o.NoProxy, o.Rounds), StreamRounds: ranRounds(!o.NoStream, o.StreamRounds), WrkThreads: o.Threads, WrkConns: o.Connections,
		WrkDurationS: o.Duration.Seconds(), OneConnDurationS: o.OneConnDuration.Seconds(), Streams: o.Streams, StreamEvents: o.StreamEvents,
		StreamDurS: o.StreamDuration.Seconds(), MetricsOn: !o.MetricsOff, LoadAvgBefore: loadAvg()}

	if err := measureTargets(ctx, ps, &o, rep); err != nil {
		return nil, err
	}
	ps.Stop(3 * time.Second) // the health section needs the CPU to itself
	rep.Health = notMeasured("skipped (-health=false)")
	if o.Health != nil {
		rep.Health = runHealth(ctx, ps, &o)
	}
	rep.Mesh = notMeasured("skipped (-mesh=false)")
	if o.Mesh != nil {
		rep.Mesh = runMesh(ctx, ps, &o, o.Mesh)
	}
	rep.Raft = notMeasured("skipped (-control=false)")
	rep.Memory = notMeasured("skipped (-control=false)")
	if o.Control != nil {
		o.Control.setDefaults()
		if !o.Control.NoRaft {
			rep.Raft = runRaft(ctx, ps, &o)
		}
		rep.Memory = runMemory(ctx, ps, &o)
	}
	rep.Routing = notMeasured("skipped (-routing=false)")
	if o.Routing != nil {
		rep.Routing = runRouting(ctx, ps, &o, o.Routing)
	}
	rep.CacheSync = notMeasured("skipped (-cachesync=false)")
	if o.CacheSync != nil {
		rep.CacheSync = runCacheSync(ctx, ps, &o, o.CacheSync)
	}
	rep.WAN = notMeasured("skipped (-wan=false)")
	if o.WAN != nil {
		rep.WAN = runWAN(ctx, ps, &o, o.WAN)
	}
	rep.Method.LoadAvgAfter = loadAvg()
	rep.Method.OthersCoresMax = othersMax(rep)
	rep.Goals = computeGoals(rep)
	return rep, nil
}

// measureTargets starts the targets and runs the proxy and streaming sections.
func measureTargets(ctx context.Context, ps *procs, o *Options, rep *Report) error {
	if o.NoProxy && o.NoStream {
		return nil
	}
	targets, upstreams, err := startTargets(ctx, ps, o, &rep.Method)
	if err != nil {
		return err
	}
	for _, t := range targets {
		rep.Method.Order = append(rep.Method.Order, t.name)
	}
	if !o.NoProxy {
		if err := measureProxy(ctx, ps, o, targets, upstreams, rep); err != nil {
			return err
		}
	}
	if !o.NoStream {
		if err := measureStreams(ctx, ps, o, targets, rep); err != nil {
			return err
		}
	}
	if m := targets[len(targets)-1]; o.Profile && m.pprofURL != "" {
		rep.Profile = profileMeshgw(ctx, o, m)
	}
	for _, t := range targets {
		if t.proxy != nil && t.proxy.Exited() {
			return fmt.Errorf("%s exited during the run: %v (see %s/%s.log)", t.name, t.proxy.Err(), o.WorkDir, t.name)
		}
	}
	return nil
}

// startTargets starts two upstreams, HAProxy and meshgw, and waits until each answers a chat
// request correctly.
func startTargets(ctx context.Context, ps *procs, o *Options, m *Method) ([]target, []*proc.Proc, error) {
	var ups []*proc.Proc
	var addrs []string
	for i := range 2 {
		p, urls, err := ps.startURL(ctx, "upstream"+strconv.Itoa(i+1), 1, o.UpstreamBin,
			"--events", strconv.Itoa(o.StreamEvents))
		if err != nil {
			return nil, nil, err
		}
		ups = append(ups, p)
		addrs = append(addrs, strings.TrimPrefix(urls[0], "http://"))
	}
	direct := target{name: "direct", url: "http://" + addrs[0]}
	if err := waitReady(ctx, direct, 10*time.Second); err != nil {
		return nil, nil, err
	}
	if err := waitReady(ctx, target{name: "upstream2", url: "http://" + addrs[1]}, 10*time.Second); err != nil {
		return nil, nil, err
	}
	hport, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	cfg := filepath.Join(o.WorkDir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(HAProxyConfig(hport, addrs)), 0o644); err != nil {
		return nil, nil, err
	}
	hp, err := ps.start("haproxy", nil, o.HAProxyBin, "-f", cfg, "-db")
	if err != nil {
		return nil, nil, err
	}
	haproxy := target{name: "haproxy", url: "http://127.0.0.1:" + strconv.Itoa(hport), proxy: hp}
	if err := waitReady(ctx, haproxy, 10*time.Second); err != nil {
		return nil, nil, err
	}
	ts := []target{direct, haproxy}
	if !o.NoMinproxy {
		p, urls, err := ps.startURL(ctx, "minproxy", 1, o.MinproxyBin, "--upstreams", strings.Join(addrs, ","))
		if err != nil {
			return nil, nil, err
		}
		mp := target{name: "minproxy", url: urls[0], proxy: p}
		if err := waitReady(ctx, mp, 10*time.Second); err != nil {
			return nil, nil, err
		}
		ts = append(ts, mp)
	}
	mesh, err := startMeshgw(ctx, ps, o, addrs, m)
	if err != nil {
		return nil, nil, err
	}
	return append(ts, mesh), ups, nil
}

// startMeshgw starts meshgw with the command line MeshgwArgs builds from its --help.
func startMeshgw(ctx context.Context, ps *procs, o *Options, addrs []string, m *Method) (target, error) {
	help := firstOutput(ctx, o.MeshgwBin, "--help")
	port, err := freePort()
	if err != nil {
		return target{}, err
	}
	mo := MeshgwOptions{Port: port, StateDir: filepath.Join(o.WorkDir, "meshgw-state"),
		FreePort: func() int { p, _ := freePort(); return p }}
	for _, a := range addrs {
		mo.Workers = append(mo.Workers, "http://"+a)
	}
	if !o.MetricsOff {
		if mo.MetricsPort, err = freePort(); err != nil {
			return target{}, err
		}
	}
	flags := HelpFlags(help)
	mo.Pprof = o.Profile
	mo.RequestLog = o.RequestLog
	mo.Policy = o.Policy
	args := MeshgwArgs(flags, mo)
	m.MeshgwArgs = args
	p, err := ps.start("meshgw", nil, o.MeshgwBin, args...)
	if err != nil {
		return target{}, err
	}
	t := target{name: "meshgw", url: "http://127.0.0.1:" + strconv.Itoa(port), proxy: p}
	if o.Profile && flags["enable-pprof"] && mo.MetricsPort != 0 {
		t.pprofURL = "http://127.0.0.1:" + strconv.Itoa(mo.MetricsPort)
	}
	return t, waitReady(ctx, t, 30*time.Second)
}

// firstOutput returns what bin prints (stdout and stderr) when run with args.
func firstOutput(ctx context.Context, bin string, args ...string) string {
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := execCommand(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	_ = cmd.Run()
	return buf.String()
}

// freePort returns a loopback port that was free a moment ago, for TCP and UDP, drawn below the
// kernel's ephemeral range (loopport.Free): a port given by the kernel to a listener on port 0,
// or to an outgoing connection (gateways probe each other several times a second), comes from
// that range and could take it before the process it is meant for binds it. A routing row
// lost a gateway so: "bind: address already in use" on its --rpc-port.
func freePort() (int, error) { return loopport.Free(1) }

// waitReady posts the chat body to t until it answers 200 with the completion marker, the
// process exits, or the deadline passes.
func waitReady(ctx context.Context, t target, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		if t.proxy != nil && t.proxy.Exited() {
			return fmt.Errorf("%s exited at start: %v (see %s.log)", t.name, t.proxy.Err(), t.name)
		}
		last = tryChat(ctx, client, t.url)
		if last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s: %s", t.name, within, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tryChat posts one chat request and returns "" when its answer is correct, else why not.
func tryChat(ctx context.Context, c *http.Client, base string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+chatPath, strings.NewReader(ChatBody))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(engine.CompletionMarker)) {
		return fmt.Sprintf("status %d, body %.200q", resp.StatusCode, body)
	}
	return ""
}

// roundOrder is the order of the targets in round r: rotated by r, with meshgw right after
// minproxy in even rounds and right before it in odd ones, so that the guard's two rates of a
// round are measured back to back, under the same conditions, each first half the time.
func roundOrder(ts []target, r int) []target {
	order := rotate(ts, r)
	var mesh *target
	for i, t := range order {
		if t.name == "meshgw" {
			mesh = &t
			order = append(order[:i:i], order[i+1:]...)
			break
		}
	}
	if mesh == nil {
		return order
	}
	for i, t := range order {
		if t.name == "minproxy" {
			at := i + 1 - r%2
			return append(order[:at:at], append([]target{*mesh}, order[at:]...)...)
		}
	}
	return append(order, *mesh)
}

// rotate returns s rotated left by r.
func rotate[T any](s []T, r int) []T {
	r %= len(s)
	return append(append([]T(nil), s[r:]...), s[:r]...)
}

// ranRounds is rounds for a section that runs, 0 for one that does not.
func ranRounds(runs bool, rounds int) int {
	if !runs {
		return 0
	}
	return rounds
}
