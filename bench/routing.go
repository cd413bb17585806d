package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshgw/meshgw/bench/routeload"
	"github.com/meshgw/meshgw/test/proc"
)

// DefaultRoutingPolicies are the routing section's rows at each gateway count, comma-separated:
// the four policies issue 28 compares, with cache_aware per gateway (--cache-scope local, as
// SMG) beside the fleet-wide default, so that its targets (routingGoals) are read from make
// bench.
const DefaultRoutingPolicies = "round_robin,prefix_hash,cache_aware --cache-scope local,cache_aware"

// RoutingOptions configure the routing-quality section: multi-turn sessions sharing a few long
// system prompts, sprayed over G gateways with no session key, against fake engines that model
// a prefix cache, prefill and decode times, and slots. Zero fields take the defaults in their
// comments (the standard workload).
type RoutingOptions struct {
	FakeworkerBin string // "bin/fakeworker"
	// Engines is K, the fake engines every gateway routes to (8).
	Engines int
	// Gateways are the numbers of gateways measured (1, 3, 5).
	Gateways []int
	// Policies are the rows of each gateway count: a policy name, optionally followed by more
	// meshgw flags for it, space-separated ("cache_aware --cache-scope local"). Default
	// DefaultRoutingPolicies.
	Policies []string
	// GatewayFlags are added to every gateway's command line.
	GatewayFlags []string
	// The engines: Slots requests computed at once (4), a prefix cache of CacheBlocks blocks
	// (1,024 of 64 bytes, 16 tokens), PrefillUs per uncached prompt token (200), DecodeUs per
	// output token after the first (2,000), OutputTokens per answer (20).
	Slots, CacheBlocks  int
	PrefillUs, DecodeUs float64
	OutputTokens        int
	// CacheAnswers makes the engines also cache each finished answer after its prompt
	// (fakeworker --cache-answers), as SGLang and vLLM keep generated tokens; by default they
	// cache prompts only, as DESIGN.md section 16 specifies.
	CacheAnswers bool
	// PrefillLanes is how many prefills each engine computes at once (1: one forward pass at
	// a time, as on one GPU; fakeworker --prefill-lanes); -1 has every admitted request
	// prefill at once, the model of the benchmark before 7 December 2026.
	PrefillLanes int
	Workload     routeload.Workload
	InFlight     int // sessions in flight (96)
	// OpenLoopRate, above 0, adds an open loop after the closed loop's rows: round_robin and
	// cache_aware at the largest gateway count, the same sessions starting at this rate per
	// second (routeload.Options.SessionRate), so that both are offered the same load. 0 adds
	// none (make bench's default is DefaultOpenLoopRate).
	OpenLoopRate           float64
	FollowUpMatch          float64 // see routeload.Options (0.9)
	RowTimeout, FormWithin time.Duration
}

func (r *RoutingOptions) setDefaults() {
	if r.FakeworkerBin == "" {
		r.FakeworkerBin = "bin/fakeworker"
	}
	r.Engines = cmp0(r.Engines, 8)
	if len(r.Gateways) == 0 {
		r.Gateways = []int{1, 3, 5}
	}
	if len(r.Policies) == 0 {
		r.Policies = strings.Split(DefaultRoutingPolicies, ",")
	}
	r.Slots = cmp0(r.Slots, 4)
	r.CacheBlocks = cmp0(r.CacheBlocks, 1024)
	if r.PrefillUs <= 0 {
		r.PrefillUs = 200
	}
	if r.DecodeUs <= 0 {
		r.DecodeUs = 2000
	}
	r.OutputTokens = cmp0(r.OutputTokens, 20)
	if r.PrefillLanes == 0 {
		r.PrefillLanes = 1
	}
	r.InFlight = cmp0(r.InFlight, 96)
	if r.FollowUpMatch <= 0 {
		r.FollowUpMatch = 0.9
	}
	if r.RowTimeout <= 0 {
		r.RowTimeout = 5 * time.Minute
	}
	if r.FormWithin <= 0 {
		r.FormWithin = 60 * time.Second
	}
}

// RoutingResult is the routing-quality section.
type RoutingResult struct {
	Status string `json:"status"` // "measured"
	// What describes the engines, the workload and the definitions of the figures.
	What              string             `json:"what"`
	Engines           int                `json:"engines"`
	Slots             int                `json:"slots"`
	CacheBlocks       int                `json:"cache_blocks"`
	PrefillUsPerToken float64            `json:"prefill_us_per_token"`
	DecodeUsPerToken  float64            `json:"decode_us_per_token"`
	OutputTokens      int                `json:"output_tokens"`
	CacheAnswers      bool               `json:"cache_answers"`
	PrefillLanes      int                `json:"prefill_lanes"`
	Workload          routeload.Workload `json:"workload"`
	InFlight          int                `json:"in_flight"`
	FollowUpMatch     float64            `json:"follow_up_match"`
	GatewayFlags      []string           `json:"gateway_flags"`
	Rows              []RoutingRow       `json:"rows"`
	// OpenLoop is the open loop's rows, when measured.
	OpenLoop *RoutingOpenLoop `json:"open_loop,omitempty"`
}

// RoutingOpenLoop is the routing section's open loop: the sessions starting at SessionRate
// per second (Poisson arrivals) through Gateways gateways, whatever the fleet serves.
type RoutingOpenLoop struct {
	SessionRate float64      `json:"session_rate"`
	Gateways    int          `json:"gateways"`
	Rows        []RoutingRow `json:"rows"`
}

// DefaultOpenLoopRate is make bench's open loop, in sessions per second: 78 requests/s of the
// standard workload's 6 turns, about 0.85 of what round_robin serves in the closed loop on the
// development machine (about 90 requests/s at 5 gateways), so that its engines queue.
const DefaultOpenLoopRate = 13

// RoutingRow is one policy at one gateway count.
type RoutingRow struct {
	Policy   string `json:"policy"` // the entry as given, with its flags
	Gateways int    `json:"gateways"`
	routeload.Result
	// EngineRequests is each engine's model requests (GET /_stats), and RequestsCoV their
	// coefficient of variation (population standard deviation ÷ mean).
	EngineRequests []int64 `json:"engine_requests"`
	RequestsCoV    float64 `json:"requests_cov"`
	// EngineCachedShare is the engines' own cached ÷ prompt tokens (GET /_stats), a check on
	// the answers' figure; EngineQueued counts requests that waited for a slot.
	EngineCachedShare float64 `json:"engine_cached_share"`
	EngineQueued      int64   `json:"engine_queued"`
	// Where a turn's time goes in the engines, means over every request: EngineWaitMs waiting
	// for a slot, EngineLaneWaitMs then waiting for a prefill lane, EnginePrefillMs the prefill
	// the model asks for its uncached tokens (so TTFT is about the three summed), EngineSlotMs
	// holding the slot (the lane's wait, prefill, decode and sending; the machine makes it
	// longer than the model's figures).
	EngineWaitMs     float64 `json:"engine_wait_ms"`
	EngineLaneWaitMs float64 `json:"engine_lane_wait_ms"`
	EnginePrefillMs  float64 `json:"engine_prefill_ms"`
	EngineSlotMs     float64 `json:"engine_slot_ms"`
	// OthersCores is the CPU other processes used meanwhile.
	OthersCores float64 `json:"others_cpu_cores"`
	Error       string  `json:"error,omitempty"`
}

// runRouting measures every policy at every gateway count, each row on fresh engines and
// gateways, stopped before the next row starts.
func runRouting(ctx context.Context, ps *procs, o *Options, r *RoutingOptions) RoutingResult {
	r.setDefaults()
	res := RoutingResult{Status: "measured", Engines: r.Engines, Slots: r.Slots, CacheBlocks: r.CacheBlocks,
		PrefillUsPerToken: r.PrefillUs, DecodeUsPerToken: r.DecodeUs, OutputTokens: r.OutputTokens, CacheAnswers: r.CacheAnswers,
		PrefillLanes: r.PrefillLanes,
		Workload:     r.Workload, InFlight: r.InFlight, FollowUpMatch: r.FollowUpMatch, GatewayFlags: r.GatewayFlags}
	res.What = fmt.Sprintf("%s; %d in flight (a closed loop: each session sends its next turn when the last ends), "+
		"each turn to a gateway picked uniformly (no session key); "+
		"%d fake engines with %d slots, an LRU prefix cache of %d blocks of 64 bytes (tokens = bytes / 4), "+
		"%g µs prefill per uncached token, %s, %g µs per output token after the first (every slot at once), "+
		"%d output tokens, %s. "+
		"cached = the engines' cached ÷ prompt tokens; follow-ups cached = turns after the first whose cached tokens "+
		"reach %g × the previous turn's prompt tokens; TTFT = client-side time to the first SSE event; "+
		"CoV = coefficient of variation of requests per engine", r.Workload.Describe(), r.InFlight, r.Engines, r.Slots,
		r.CacheBlocks, r.PrefillUs, lanesWhat(r.PrefillLanes), r.DecodeUs, r.OutputTokens, cachedWhat(r.CacheAnswers), r.FollowUpMatch)
	script := r.Workload.Script()
	// Every row runs its engines on the same ports: the worker ids, which hash-based policies
	// hash, are then the same in every row, so that rows differ only by policy and gateways.
	ports, err := freePorts(r.Engines)
	if err != nil {
		return RoutingResult{Status: "measured", What: res.What, Rows: []RoutingRow{{Error: err.Error()}}}
	}
	measure := func(policy string, g int, rate float64) (RoutingRow, bool) {
		o.Log.Info("routing: measuring", "policy", policy, "gateways", g, "engines", r.Engines, "session_rate", rate)
		row := RoutingRow{Policy: policy, Gateways: g}
		if err := routingRow(ctx, ps, o, r, script, ports, rate, &row); err != nil {
			row.Error = err.Error()
			o.Log.Warn("routing: row failed", "policy", policy, "gateways", g, "err", err)
		}
		return row, ctx.Err() == nil
	}
	for _, g := range r.Gateways {
		for _, policy := range r.Policies {
			row, more := measure(policy, g, 0)
			res.Rows = append(res.Rows, row)
			if !more {
				return res
			}
		}
	}
	if r.OpenLoopRate > 0 {
		open := &RoutingOpenLoop{SessionRate: r.OpenLoopRate, Gateways: slices.Max(r.Gateways)}
		res.OpenLoop = open
		for _, policy := range []string{routingGoalBaselinePolicy, routingGoalPolicy} {
			row, more := measure(policy, open.Gateways, r.OpenLoopRate)
			open.Rows = append(open.Rows, row)
			if !more {
				return res
			}
		}
	}
	return res
}

// routingRow starts the engines and gateways of one row, plays the script through them, reads
// the engines' counters, and stops them all.
func routingRow(ctx context.Context, ps *procs, o *Options, r *RoutingOptions, script routeload.Script, ports []int, rate float64, row *RoutingRow) error {
	var started []*proc.Proc
	defer func() { proc.StopAll(5*time.Second, started...) }()
	tag := fmt.Sprintf("routing-g%d-%s", row.Gateways, slug(row.Policy))
	if rate > 0 {
		tag += "-open"
	}
	var engines []string
	for i, port := range ports {
		p, url, err := startRoutingEngine(ctx, ps, r, fmt.Sprintf("%s-e%d", tag, i+1), fmt.Sprintf("engine-%d", i+1), port)
		if err != nil {
			return err
		}
		started = append(started, p)
		engines = append(engines, url)
	}
	var gws []*controlGateway
	var seed string
	for i := range row.Gateways {
		g, mesh, err := startRoutingGateway(ps, o, r, fmt.Sprintf("%s-gw%d", tag, i+1), row.Policy, engines, seed)
		if err != nil {
			return err
		}
		started = append(started, g.p)
		gws = append(gws, g)
		if i == 0 {
			seed = mesh
		}
	}
	client := &http.Client{Timeout: 5 * time.Second}
	if err := waitRoutable(ctx, client, gws, r.Engines, r.FormWithin); err != nil {
		return err
	}
	var bases []string
	for _, g := range gws {
		bases = append(bases, g.base)
	}
	others := ps.startOthers()
	row.Result = routeload.Run(ctx, script, routeload.Options{Gateways: bases, InFlight: r.InFlight, SessionRate: rate,
		FollowUpMatch: r.FollowUpMatch, Deadline: r.RowTimeout, Seed: r.Workload.Seed})
	row.OthersCores = others.stop()
	return engineCounters(ctx, client, engines, r.PrefillUs, row)
}

// lanesWhat says how many prompts an engine prefills at once.
func lanesWhat(lanes int) string {
	switch {
	case lanes < 0:
		return "every admitted prompt prefilled at once"
	case lanes == 1:
		return "one prompt prefilled at a time (as one GPU's forward pass)"
	}
	return fmt.Sprintf("%d prompts prefilled at once", lanes)
}

// cachedWhat says what the engines cache.
func cachedWhat(answers bool) string {
	if answers {
		return "each finished answer cached after its prompt (as SGLang and vLLM keep generated tokens)"
	}
	return "prompts cached, answers not"
}

// startRoutingEngine starts one fake engine on port with the row's compute model and returns
// its URL.
func startRoutingEngine(ctx context.Context, ps *procs, r *RoutingOptions, name, node string, port int) (*proc.Proc, string, error) {
	p, urls, err := ps.startURL(ctx, name, 1, r.FakeworkerBin, routingEngineArgs(r, node, port)...)
	if err != nil {
		return nil, "", err
	}
	return p, urls[0], nil
}

// routingEngineArgs is the fakeworker command line of one engine of the row: its compute model.
func routingEngineArgs(r *RoutingOptions, node string, port int) []string {
	return []string{"--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--node-name", node, "--log-level", "warn", "--slots", strconv.Itoa(r.Slots),
		"--cache-blocks", strconv.Itoa(r.CacheBlocks), "--prefill-us-per-token", strconv.FormatFloat(r.PrefillUs, 'g', -1, 64),
		"--decode-us-per-token", strconv.FormatFloat(r.DecodeUs, 'g', -1, 64), "--cache-answers=" + strconv.FormatBool(r.CacheAnswers),
		"--prefill-lanes", strconv.Itoa(max(0, r.PrefillLanes)),
		"--faults", fmt.Sprintf(`{"stream_chunks":%d}`, r.OutputTokens)}
}

// startRoutingGateway starts one gateway routing to engines with the entry's policy and flags,
// joining join (a mesh address) unless it is empty; it returns the gateway and its mesh address.
func startRoutingGateway(ps *procs, o *Options, r *RoutingOptions, name, entry string, engines []string, join string) (*controlGateway, string, error) {
	var ports [4]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, "", err
		}
		ports[i] = p
	}
	dir, err := tempStateDir(o, name)
	if err != nil {
		return nil, "", err
	}
	fields := strings.Fields(entry)
	args := []string{"--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--node-id", name,
		"--state-dir", dir, "--raft-port", strconv.Itoa(ports[1]), "--mesh-port", strconv.Itoa(ports[2]),
		"--rpc-port", strconv.Itoa(ports[3]), "--mesh-profile", "local", "--log-level", "warn", "--prometheus-port", "0",
		"--owner-failover-grace-secs", "86400", "--worker-urls", strings.Join(engines, ","), "--policy", fields[0]}
	args = append(append(args, fields[1:]...), r.GatewayFlags...)
	if join != "" {
		args = append(args, "--join", join)
	}
	p, err := ps.start(name, nil, o.MeshgwBin, args...)
	if err != nil {
		return nil, "", err
	}
	return &controlGateway{p: p, started: time.Now(), log: filepath.Join(ps.dir, name+".log"),
		base: "http://127.0.0.1:" + strconv.Itoa(ports[0])}, "127.0.0.1:" + strconv.Itoa(ports[2]), nil
}

// waitRoutable waits until every gateway lists every one of want engines as routable (and, with
// several gateways, they form one cluster).
func waitRoutable(ctx context.Context, c *http.Client, gws []*controlGateway, want int, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if len(gws) > 1 {
		if err := waitFormedBench(ctx, c, gws, within); err != nil {
			return err
		}
	}
	for _, g := range gws {
		for {
			if g.p.Exited() {
				return fmt.Errorf("%s exited: %v (see %s)", g.base, g.p.Err(), g.log)
			}
			var list struct {
				Workers []struct {
					Routable bool `json:"routable"`
				} `json:"workers"`
			}
			n := 0
			if getJSON(ctx, c, g.base+"/workers", &list) == nil {
				for _, w := range list.Workers {
					if w.Routable {
						n++
					}
				}
			}
			if n == want {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: %d of %d engines routable within %s (see %s)", g.base, n, want, within, g.log)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for len(ports) < n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// engineStats is the part of a fake engine's GET /_stats the section reads.
type engineStats struct {
	Requests     int64   `json:"requests"`
	PromptTokens int64   `json:"prompt_tokens"`
	CachedTokens int64   `json:"cached_tokens"`
	Queued       int64   `json:"queued"`
	QueueWaitMs  float64 `json:"queue_wait_ms"`
	LaneWaitMs   float64 `json:"prefill_wait_ms"`
	SlotMs       float64 `json:"slot_ms"`
}

// engineCounters reads every engine's counters into row; prefillUs is the engines' prefill
// time per uncached token.
func engineCounters(ctx context.Context, c *http.Client, engines []string, prefillUs float64, row *RoutingRow) error {
	var prompt, cached, requests int64
	var wait, lane, slot float64
	for _, e := range engines {
		var st engineStats
		if err := getJSON(ctx, c, e+"/_stats", &st); err != nil {
			return err
		}
		row.EngineRequests = append(row.EngineRequests, st.Requests)
		prompt += st.PromptTokens
		cached += st.CachedTokens
		row.EngineQueued += st.Queued
		requests += st.Requests
		wait += st.QueueWaitMs
		lane += st.LaneWaitMs
		slot += st.SlotMs
	}
	if prompt > 0 {
		row.EngineCachedShare = float64(cached) / float64(prompt)
	}
	if requests > 0 {
		n := float64(requests)
		row.EngineWaitMs, row.EngineLaneWaitMs, row.EngineSlotMs = wait/n, lane/n, slot/n
		row.EnginePrefillMs = float64(prompt-cached) * prefillUs / 1000 / n
	}
	row.RequestsCoV = cov(row.EngineRequests)
	return nil
}

// cov is the coefficient of variation of v: the population standard deviation over the mean.
func cov(v []int64) float64 {
	if len(v) == 0 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	mean := sum / float64(len(v))
	if mean == 0 {
		return 0
	}
	var sq float64
	for _, x := range v {
		sq += (float64(x) - mean) * (float64(x) - mean)
	}
	return math.Sqrt(sq/float64(len(v))) / mean
}

var notSlug = regexp.MustCompile(`[^a-z0-9]+`)

// slug makes a policy entry fit a file name.
func slug(s string) string {
	return strings.Trim(notSlug.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

// PrintTable writes the section as a table, one row per policy and gateway count.
func (res RoutingResult) PrintTable(w io.Writer) {
	fmt.Fprintf(w, "routing: %s\n", res.What)
	if len(res.GatewayFlags) > 0 {
		fmt.Fprintf(w, "routing: every gateway also ran with %s\n", strings.Join(res.GatewayFlags, " "))
	}
	printRoutingRows(w, res.Rows)
	if ol := res.OpenLoop; ol != nil {
		fmt.Fprintf(w, "routing: an open loop beside it: the same sessions starting at %g a second (Poisson arrivals), "+
			"through %d gateways, so that both policies are offered the same load (no verdict: the goals are read on the closed loop)\n",
			ol.SessionRate, ol.Gateways)
		printRoutingRows(w, ol.Rows)
	}
}

// printRoutingRows writes rows as a table, then the failures of any.
func printRoutingRows(w io.Writer, rows []RoutingRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "policy\tgateways\tcached\tfollow-ups cached\tTTFT p50 ms\tTTFT p99 ms\treq/s\tCoV\tqueued\twait ms\tlane ms\tprefill ms\tslot ms\tfailed\tothers' cores\t\n")
	for _, r := range rows {
		if r.Error != "" && r.Requests == 0 {
			fmt.Fprintf(tw, "%s\t%d\t—\t—\t—\t—\t—\t—\t—\t—\t—\t—\t—\t—\t—\t\n", r.Policy, r.Gateways)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f (%d/%d)\t%.0f\t%.0f\t%.0f\t%.2f\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%.2f\t\n", r.Policy, r.Gateways,
			r.CachedShare, r.FollowUpShare, r.FollowUpsCached, r.FollowUps, r.TTFTP50Ms, r.TTFTP99Ms, r.RequestsPerSec,
			r.RequestsCoV, r.EngineQueued, r.EngineWaitMs, r.EngineLaneWaitMs, r.EnginePrefillMs, r.EngineSlotMs, r.Failed+r.Unsent, r.OthersCores)
	}
	tw.Flush()
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(w, "routing: %s at %d gateways: %s\n", r.Policy, r.Gateways, r.Error)
		} else if r.FirstError != "" {
			fmt.Fprintf(w, "routing: %s at %d gateways: first failure: %s\n", r.Policy, r.Gateways, r.FirstError)
		}
	}
}
