package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Report is the JSON of `make bench` (DESIGN.md section 15). Fields may be added; none may be
// renamed.
type Report struct {
	Machine       string                  `json:"machine"`
	MachineDetail MachineInfo             `json:"machine_detail"`
	Date          string                  `json:"date"`
	Method        Method                  `json:"method"`
	Proxy         map[string]*ProxyTarget `json:"proxy"`
	Stream        *StreamSection          `json:"stream"`
	Health        any                     `json:"health"`
	Mesh          any                     `json:"mesh"`
	Raft          any                     `json:"raft"`
	// Memory is a gateway restoring many imported workers: start time and heap per worker.
	Memory any `json:"memory"`
	// Routing is the routing-quality section (a RoutingResult), or NotMeasured.
	Routing any `json:"routing"`
	// CacheSync is the fleet-wide cache index's propagation (a CacheSyncResult), or
	// NotMeasured.
	CacheSync any `json:"cachesync"`
	// WAN is three regions over simulated WAN links (a WANResult), or NotMeasured.
	WAN any `json:"wan"`
	// Profile holds meshgw's CPU profiles under load, when taken.
	Profile *ProfileSection `json:"meshgw_profile,omitempty"`
	Goals   []Goal          `json:"goals"`
}

// Method records how the figures were taken.
type Method struct {
	Quick        bool     `json:"quick"`
	Rounds       int      `json:"rounds"`        // of the plain rows; 0 when they did not run
	StreamRounds int      `json:"stream_rounds"` // of the streaming rows; 0 when they did not run
	Order        []string `json:"order"`         // the order of round 1; each round rotates it by one
	WrkThreads   int      `json:"wrk_threads"`
	WrkConns     int      `json:"wrk_connections"`
	WrkDurationS float64  `json:"wrk_duration_s"`
	// OneConnDurationS is the length of each one-connection run.
	OneConnDurationS float64  `json:"one_connection_duration_s"`
	Streams          int      `json:"streams"`
	StreamEvents     int      `json:"stream_events"`
	StreamDurS       float64  `json:"stream_duration_s"`
	MeshgwArgs       []string `json:"meshgw_args"`
	MetricsOn        bool     `json:"meshgw_metrics_listener"`
	LoadAvgBefore    string   `json:"loadavg_before"`
	LoadAvgAfter     string   `json:"loadavg_after"`
	// OthersCoresMax is the most CPU (in cores) that processes outside the benchmark used
	// during any one measurement: 0 on a quiet machine.
	OthersCoresMax float64 `json:"others_cpu_cores_max"`
}

// othersMax is the largest OthersCores of any round.
func othersMax(r *Report) float64 {
	m := 0.0
	for _, t := range r.Proxy {
		for _, rd := range t.Rounds {
			m = max(m, rd.OthersCores)
		}
	}
	if s := r.Stream; s != nil {
		for _, t := range []*StreamTarget{s.Direct, s.HAProxy, s.Minproxy, s.Meshgw} {
			if t != nil {
				for _, rd := range t.Rounds {
					m = max(m, rd.OthersCores)
				}
			}
		}
	}
	return m
}

// ProxyTarget holds the medians over rounds of one target's non-streaming load.
type ProxyTarget struct {
	RPS   float64 `json:"rps"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// CPUUsPerReq is the proxy process's CPU time per request served; null for direct, which
	// has no proxy.
	CPUUsPerReq *float64 `json:"cpu_us_per_req"`
	// CPUUserUsPerReq is the part of it in the proxy's own code (user time); the rest is the
	// kernel's work on its behalf.
	CPUUserUsPerReq *float64 `json:"cpu_user_us_per_req,omitempty"`
	// UpstreamCPUUsPerReq is the engines' CPU time per request, for scale.
	UpstreamCPUUsPerReq float64 `json:"upstream_cpu_us_per_req"`
	// Totals over rounds; every one must be 0 for the run to count.
	SocketErrors int64        `json:"socket_errors"`
	Non2xx       int64        `json:"non_2xx"`
	BadResponses int64        `json:"bad_responses"`
	Checked      int64        `json:"checked_responses"`
	Rounds       []ProxyRound `json:"rounds"`
	// OneConn holds the medians of the one-connection runs (wrk -t1 -c1).
	OneConn *OneConn `json:"one_connection"`
}

// OneConn is the latency over a single connection, where nothing queues.
type OneConn struct {
	RPS          float64 `json:"rps"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	Errors       int64   `json:"errors"` // socket errors, non-2xx and bad bodies
	BadResponses int64   `json:"bad_responses"`
}

func summarizeOneConn(rs []WrkResult) *OneConn {
	if len(rs) == 0 {
		return nil
	}
	var rps, p50, p99 []float64
	c := &OneConn{}
	for _, r := range rs {
		rps, p50, p99 = append(rps, r.RPS), append(p50, r.P50Ms), append(p99, r.P99Ms)
		c.Errors += r.SocketErrs + r.Non2xx + r.BadBodies
		c.BadResponses += r.BadBodies
	}
	c.RPS, c.P50Ms, c.P99Ms = median(rps), median(p50), median(p99)
	return c
}

// ProxyRound is one wrk run of one target.
type ProxyRound struct {
	WrkResult
	CPUUsPerReq         *float64 `json:"cpu_us_per_req"`
	CPUUserUsPerReq     *float64 `json:"cpu_user_us_per_req,omitempty"` // of it, user time
	UpstreamCPUUsPerReq float64  `json:"upstream_cpu_us_per_req"`
	// OthersCores is the CPU (in cores) that processes outside the benchmark used meanwhile.
	OthersCores float64 `json:"others_cpu_cores"`
}

// StreamSection holds the streaming figures: medians over rounds per target, and the paced
// check (an upstream that pauses between events).
type StreamSection struct {
	Direct  *StreamTarget `json:"direct"`
	HAProxy *StreamTarget `json:"haproxy"`
	// Minproxy is the reference fasthttp proxy (bench/cmd/minproxy), when measured.
	Minproxy *StreamTarget            `json:"minproxy,omitempty"`
	Meshgw   *StreamTarget            `json:"meshgw"`
	Paced    map[string]*StreamResult `json:"paced"`
	// PacedDelayMs and PacedEvents describe the paced check.
	PacedDelayMs int `json:"paced_delay_ms"`
	PacedEvents  int `json:"paced_events"`
}

// StreamTarget holds the medians over rounds of one target's streaming load.
type StreamTarget struct {
	StreamsPerSec float64 `json:"streams_per_s"`
	TTFBP50Ms     float64 `json:"ttfb_p50_ms"`
	TTFBP99Ms     float64 `json:"ttfb_p99_ms"`
	// CPUUsPerStream is the proxy's CPU time per completed stream; null for direct.
	CPUUsPerStream *float64      `json:"cpu_us_per_stream"`
	Completed      int64         `json:"completed"`
	Cut            int64         `json:"cut"`
	WrongEvents    int64         `json:"wrong_events"`
	Rounds         []StreamRound `json:"rounds"`
}

// StreamRound is one streaming load of one target.
type StreamRound struct {
	StreamResult
	CPUUsPerStream *float64 `json:"cpu_us_per_stream"`
	OthersCores    float64  `json:"others_cpu_cores"`
}

// NotMeasured is the section of a figure that this run did not take.
type NotMeasured struct {
	Status string `json:"status"` // always "not yet measured"
	Reason string `json:"reason"`
}

func notMeasured(reason string) NotMeasured {
	return NotMeasured{Status: "not yet measured", Reason: reason}
}

// Goal is one target figure of the issue, next to what was measured.
type Goal struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Goal  string `json:"goal"`
	// Met is null when the figure could not be measured.
	Met *bool `json:"met"`
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianPtr is the median of the non-nil values, nil when there are none.
func medianPtr(v []*float64) *float64 {
	var s []float64
	for _, p := range v {
		if p != nil {
			s = append(s, *p)
		}
	}
	if len(s) == 0 {
		return nil
	}
	m := median(s)
	return &m
}

// summarizeProxy fills the medians and totals from the rounds.
func summarizeProxy(rounds []ProxyRound) *ProxyTarget {
	t := &ProxyTarget{Rounds: rounds}
	var rps, p50, p99, up []float64
	var cpu, user []*float64
	for _, r := range rounds {
		rps, p50, p99 = append(rps, r.RPS), append(p50, r.P50Ms), append(p99, r.P99Ms)
		cpu, user, up = append(cpu, r.CPUUsPerReq), append(user, r.CPUUserUsPerReq), append(up, r.UpstreamCPUUsPerReq)
		t.SocketErrors += r.SocketErrs
		t.Non2xx += r.Non2xx
		t.BadResponses += r.BadBodies
		t.Checked += r.Checked
	}
	t.RPS, t.P50Ms, t.P99Ms = median(rps), median(p50), median(p99)
	t.CPUUsPerReq, t.CPUUserUsPerReq, t.UpstreamCPUUsPerReq = medianPtr(cpu), medianPtr(user), median(up)
	return t
}

// summarizeStream fills the medians and totals from the rounds.
func summarizeStream(rounds []StreamRound) *StreamTarget {
	t := &StreamTarget{Rounds: rounds}
	var sps, p50, p99 []float64
	var cpu []*float64
	for _, r := range rounds {
		sps, p50, p99 = append(sps, r.StreamsPerSec), append(p50, r.TTFBP50Ms), append(p99, r.TTFBP99Ms)
		cpu = append(cpu, r.CPUUsPerStream)
		t.Completed += r.Completed
		t.Cut += r.Cut
		t.WrongEvents += r.WrongEvents
	}
	t.StreamsPerSec, t.TTFBP50Ms, t.TTFBP99Ms = median(sps), median(p50), median(p99)
	t.CPUUsPerStream = medianPtr(cpu)
	return t
}

// rounds says how many interleaved rounds of what length the plain and the streaming rows ran,
// leaving out those that did not run.
func (m Method) rounds() string {
	var parts []string
	if m.Rounds > 0 {
		parts = append(parts, fmt.Sprintf("%d of %gs plain", m.Rounds, m.WrkDurationS))
	}
	if m.StreamRounds > 0 {
		parts = append(parts, fmt.Sprintf("%d of %gs streams", m.StreamRounds, m.StreamDurS))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// PrintTable writes the report as tables: each target's figures, the ratios, and each goal
// marked met or not met.
func (r *Report) PrintTable(w io.Writer) {
	fmt.Fprintf(w, "machine: %s\ndate: %s; rounds: %s (interleaved, order rotated per round, minproxy and meshgw back to back); load average before %s, after %s\n",
		r.Machine, r.Date, r.Method.rounds(), r.Method.LoadAvgBefore, r.Method.LoadAvgAfter)
	fmt.Fprintf(w, "other processes used up to %.2f of %d cores during a measurement (0 on a quiet machine)\n\n",
		r.Method.OthersCoresMax, r.MachineDetail.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(r.Proxy) > 0 {
		r.printProxy(tw)
	}
	if s := r.Stream; s != nil {
		fmt.Fprintln(w)
		r.printStream(w, tw)
	}
	fmt.Fprintln(w)
	r.printSections(w)
	r.printProfile(w)
	fmt.Fprintln(w)
	gw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(gw, "goal\tmeasured\ttarget\tverdict\n")
	for _, g := range r.Goals {
		fmt.Fprintf(gw, "%s\t%s\t%s\t%s\n", g.Name, g.Value, cmpStr(g.Goal, "—"), verdict(g))
	}
	gw.Flush()
}

func (r *Report) printProxy(tw *tabwriter.Writer) {
	fmt.Fprintf(tw, "non-streaming (wrk -t%d -c%d -d%gs)\treq/s\tp50 ms\tp99 ms\tproxy CPU µs/req\tof it user\tengines CPU µs/req\terrors\tbad bodies\t\n",
		r.Method.WrkThreads, r.Method.WrkConns, r.Method.WrkDurationS)
	for _, name := range targetNames {
		t := r.Proxy[name]
		if t == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%.3f\t%s\t%s\t%.1f\t%d\t%d\t\n", name, t.RPS, t.P50Ms, t.P99Ms,
			fmtPtr(t.CPUUsPerReq, "%.1f"), fmtPtr(t.CPUUserUsPerReq, "%.1f"), t.UpstreamCPUUsPerReq, t.SocketErrors+t.Non2xx, t.BadResponses)
	}
	tw.Flush()
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "one connection (wrk -t1 -c1 -d%gs)\treq/s\tp50 ms\tp99 ms\terrors\t\n", r.Method.OneConnDurationS)
	for _, name := range targetNames {
		if t := r.Proxy[name]; t != nil && t.OneConn != nil {
			fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%.3f\t%d\t\n", name, t.OneConn.RPS, t.OneConn.P50Ms, t.OneConn.P99Ms, t.OneConn.Errors)
		}
	}
	tw.Flush()
}

func (r *Report) printStream(w io.Writer, tw *tabwriter.Writer) {
	s := r.Stream
	fmt.Fprintf(tw, "streaming (%d streams × %d events)\tstreams/s\tTTFB p50 ms\tTTFB p99 ms\tproxy CPU µs/stream\tcut\twrong count\t\n",
		r.Method.Streams, r.Method.StreamEvents)
	for _, name := range targetNames {
		if t := s.target(name); t != nil {
			fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%.3f\t%s\t%d\t%d\t\n", name, t.StreamsPerSec, t.TTFBP50Ms, t.TTFBP99Ms,
				fmtPtr(t.CPUUsPerStream, "%.1f"), t.Cut, t.WrongEvents)
		}
	}
	tw.Flush()
	if len(s.Paced) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintf(tw, "paced (%d ms between %d events)\tTTFB p50 ms\tgap min ms\tgap p50 ms\tgap max ms\tcut\t\n", s.PacedDelayMs, s.PacedEvents)
	for _, name := range targetNames {
		if p := s.Paced[name]; p != nil {
			fmt.Fprintf(tw, "%s\t%.3f\t%s\t%s\t%s\t%d\t\n", name, p.TTFBP50Ms, fmtPtr(p.GapMinMs, "%.1f"),
				fmtPtr(p.GapP50Ms, "%.1f"), fmtPtr(p.GapMaxMs, "%.1f"), p.Cut)
		}
	}
	tw.Flush()
}

func (r *Report) printSections(w io.Writer) {
	for _, sec := range []struct {
		name string
		v    any
	}{{"health", r.Health}, {"mesh", r.Mesh}, {"raft", r.Raft}, {"memory", r.Memory}, {"routing", r.Routing}, {"cachesync", r.CacheSync}, {"wan", r.WAN}} {
		switch v := sec.v.(type) {
		case NotMeasured:
			fmt.Fprintf(w, "%s: %s (%s)\n", sec.name, v.Status, v.Reason)
		case HealthResult:
			fmt.Fprintf(w, "%s: %d workers on %d hosts every %gs: %.0f probes/s of %.0f expected, %d failed, %d ready; "+
				"checker CPU %.1f%% of a core (%.1f µs/probe), RSS %.0f MiB (peak %.0f MiB), %d goroutines; engines CPU %.1f%%\n",
				sec.name, v.Workers, v.Hosts, v.IntervalS, v.ProbesPerSec, v.ExpectedPerSec, v.Failed, v.ReadyWorkers,
				v.CPUPercent, v.CPUUsPerProbe, v.RSSMiB, v.PeakRSSMiB, v.Goroutines, v.UpstreamCPUPercent)
		case MeshResult:
			for _, c := range []*MeshConvergence{v.LAN, v.Local} {
				fmt.Fprintf(w, "%s: %d peers, %s profile: membership converged in %.2f s median, %.2f s max over %d runs %v (%s)\n",
					sec.name, c.Peers, c.Profile, c.MedianS, c.MaxS, len(c.RunsS), c.RunsS, c.What)
			}
			printBulletins(w, sec.name, v)
			switch f := v.Failover.(type) {
			case FailoverResult:
				fmt.Fprintf(w, "%s: failover, %d workers, %s profile, %g s grace: all owned again %.2f s median, %.2f s max "+
					"after kill -9 over %d runs %v (killed owner was the raft leader: %v) (%s)\n",
					sec.name, f.Workers, f.Profile, f.GraceS, f.MedianS, f.MaxS, len(f.RunsS), f.RunsS, f.KilledLeader, f.What)
			case NotMeasured:
				fmt.Fprintf(w, "%s: failover: %s (%s)\n", sec.name, f.Status, f.Reason)
			}
		case RaftResult:
			for _, l := range slices.Concat([]*WriteLatency{v.DiskCommit}, v.DiskCommitAt, []*WriteLatency{v.Admin, v.Cluster, v.ClusterAck}, v.FleetAck, v.FleetAckMemory) {
				if l == nil {
					continue
				}
				fmt.Fprintf(w, "%s: %d sequential writes, %d node(s): p50 %.2f ms, p99 %.2f ms, max %.2f ms, %.0f writes/s (%s)\n",
					sec.name, l.Writes, l.Nodes, l.P50Ms, l.P99Ms, l.MaxMs, l.WritesPerSec, l.What)
			}
		case MemoryResult:
			if v.Workers > 0 {
				fmt.Fprintf(w, "%s: %d imported workers in raft state: served %.2f s after start (median of %v s), leading at %.2f s; "+
					"heap %.1f MiB vs %.1f MiB with none = %.0f bytes per worker; RSS %.0f MiB vs %.0f MiB = %.0f bytes per worker\n",
					sec.name, v.Workers, v.StartS, v.StartRunsS, v.LeaderS, v.HeapMiB, v.BaselineHeapMiB, v.BytesPerWorker,
					v.RSSMiB, v.BaselineRSSMiB, v.RSSBytesPerWorker)
			}
			for _, r := range v.Registration {
				fmt.Fprintf(w, "%s: %d sequential registrations with %d records: p50 %.2f ms, p99 %.2f ms, %.0f per s; then stopped %.2f s after SIGTERM\n",
					sec.name, r.Registrations, r.Workers, r.P50Ms, r.P99Ms, r.PerSec, r.StopS)
			}
			printUploads(w, sec.name, v.Uploads)
		case RoutingResult:
			v.PrintTable(w)
		case CacheSyncResult:
			printCacheSync(w, sec.name, v)
		case WANResult:
			printWAN(w, sec.name, v)
		}
	}
}

// printUploads writes the upload lines of the memory section.
func printUploads(w io.Writer, name string, v any) {
	switch u := v.(type) {
	case []UploadRun:
		for _, r := range u {
			budget := strconv.Itoa(r.BudgetMiB) + " MiB"
			if r.BudgetMiB == 0 {
				budget = fmt.Sprintf("default (%.0f MiB)", r.EffectiveBudgetMiB)
			}
			fmt.Fprintf(w, "%s: %d concurrent %d MiB uploads, --max-buffered-body-mb %s: %d ok, %d overloaded, %d failed in %.1f s; "+
				"RSS %.0f MiB before, peak %.0f MiB, %.0f MiB after; peak buffered %.0f MiB, %d streamed%s\n", name, r.Uploads,
				r.UploadMiB, budget, r.OK, r.Overloaded, r.Failed, r.WallS, r.RSSBeforeMiB, r.PeakRSSMiB, r.RSSAfterMiB,
				r.PeakBufferedMiB, r.Streamed, errSuffix(r.Error))
		}
	case NotMeasured:
		fmt.Fprintf(w, "%s: uploads: %s (%s)\n", name, u.Status, u.Reason)
	}
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return " (stopped: " + e + ")"
}

// printBulletins writes the bulletin lines of the mesh section.
func printBulletins(w io.Writer, name string, v MeshResult) {
	switch p := v.BulletinPropagation.(type) {
	case []BulletinPropagation:
		for _, r := range p {
			fmt.Fprintf(w, "%s: bulletin propagation, %d peers, %s profile: p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d of %d lost "+
				"(bound %.0f ms), %d over 1 s; until the last peer p50 %.1f ms, p99 %.1f ms (%s)\n", name, r.Peers, r.Profile,
				r.P50Ms, r.P99Ms, r.MaxMs, r.Lost, r.Pairs, r.BoundMs, r.Over1s, r.AllP50Ms, r.AllP99Ms, r.What)
		}
	case NotMeasured:
		fmt.Fprintf(w, "%s: bulletin propagation: %s (%s)\n", name, p.Status, p.Reason)
	}
	switch b := v.BulletinBytes.(type) {
	case BulletinBytes:
		fmt.Fprintf(w, "%s: bulletin bytes, %d workers, %d peers: steady owner %.0f B/s, peer %.0f B/s; %g changes/s owner %.0f B/s, "+
			"peer %.0f B/s (held by every peer %.1f s after publishing, %.2f s after the churn) (%s)\n", name, b.Workers, b.Peers,
			b.Steady.OwnerBytesPerS, b.Steady.PeerBytesPerS, b.ChurnPerS, b.Churn.OwnerBytesPerS, b.Churn.PeerBytesPerS,
			b.SpreadS, b.ChurnHeldS, b.What)
	case NotMeasured:
		fmt.Fprintf(w, "%s: bulletin bytes: %s (%s)\n", name, b.Status, b.Reason)
	}
}

// targetNames is every target in table order; a run measures those it started.
func (r *Report) printProfile(w io.Writer) {
	if r.Profile == nil {
		return
	}
	for _, p := range []struct {
		name string
		p    *Profile
	}{{"wrk", r.Profile.Plain}, {"streams", r.Profile.Stream}} {
		if p.p == nil {
			continue
		}
		fmt.Fprintf(w, "\nmeshgw CPU profile under the %s load (%d s, %s):\n", p.name, p.p.Seconds, p.p.File)
		if p.p.Error != "" {
			fmt.Fprintf(w, "  not taken: %s\n", p.p.Error)
		}
		for _, line := range p.p.Top {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

var targetNames = []string{"direct", "haproxy", "minproxy", "meshgw"}

func (s *StreamSection) target(name string) *StreamTarget {
	switch name {
	case "direct":
		return s.Direct
	case "haproxy":
		return s.HAProxy
	case "minproxy":
		return s.Minproxy
	case "meshgw":
		return s.Meshgw
	}
	return nil
}

func (s *StreamSection) setTarget(name string, t *StreamTarget) {
	switch name {
	case "direct":
		s.Direct = t
	case "haproxy":
		s.HAProxy = t
	case "minproxy":
		s.Minproxy = t
	case "meshgw":
		s.Meshgw = t
	}
}

func fmtPtr(p *float64, format string) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf(format, *p)
}

func cmpStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// verdict is a goal row's last column. A figure that was not measured has no row at all, so a
// row without a verdict was measured, but not at the goal's scale or on its workload (a quick
// run's smaller fleet, an open loop): it is "no verdict", not "not measured".
func verdict(g Goal) string {
	switch {
	case g.Goal == "" && g.Met == nil:
		return "(for scale)"
	case g.Met == nil:
		return "no verdict"
	case *g.Met:
		return "met"
	}
	return "NOT MET"
}

// joinNonEmpty joins the non-empty parts with sep.
func joinNonEmpty(sep string, parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, sep)
}
