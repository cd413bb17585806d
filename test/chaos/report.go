package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/meshgw/meshgw/test/chaos/check"
	"github.com/meshgw/meshgw/test/chaos/nemesis"
)

// Report is the JSON report of a run (DESIGN.md section 15), with what it skipped and why.
type Report struct {
	Seed      uint64  `json:"seed"`
	DurationS float64 `json:"duration_s"`
	Nodes     int     `json:"nodes"`
	Engines   int     `json:"engines"`
	Isolated  bool    `json:"isolated"`
	// Regions and WANDelayMs describe a run over a simulated WAN: the regions the gateways and
	// engines spread over, and the one-way delay between two of them.
	Regions    []string       `json:"regions,omitempty"`
	WANDelayMs float64        `json:"wan_delay_ms,omitempty"`
	Faults     map[string]int `json:"faults"`
	// Refused counts the faults that did not take (a drain the cluster refused, a forced leader
	// change after which no other leader was elected); they are not in Faults.
	Refused map[string]int `json:"faults_refused,omitempty"`
	// FaultSeconds is, per kind, the time its faults held their targets, from the injection
	// until the targets were back.
	FaultSeconds map[string]float64 `json:"fault_seconds,omitempty"`
	// BackSeconds is the part of FaultSeconds after each fault healed (its processes ran and
	// its cuts were gone) until its targets were back: seen alive by another gateway, seeing a
	// leader.
	BackSeconds map[string]float64 `json:"back_seconds,omitempty"`
	// WaitSeconds is, per kind, the time its faults waited for room before they started: the
	// rules that keep the cluster able to make progress (docs/chaos.md, Faults).
	WaitSeconds map[string]float64 `json:"room_wait_seconds,omitempty"`
	// TurnSeconds is the part of WaitSeconds the faults waited for their kind's turn (the
	// kinds take turns by count), not for the rules.
	TurnSeconds map[string]float64 `json:"turn_wait_seconds,omitempty"`
	Skipped     map[string]string  `json:"skipped,omitempty"`
	Requests    check.Requests     `json:"requests"`
	// LostByCause counts the lost requests (failed_gateway and gateway_down) by cause:
	// shutdown, engine_hang, engine_error, gateway_fault (check.Losses).
	LostByCause map[string]int          `json:"lost_by_cause"`
	AdminOps    map[string]int          `json:"admin_ops"`
	Invariants  map[string]check.Result `json:"invariants"`
	Errors      []string                `json:"nemesis_errors,omitempty"`
	// RegionCuts measures each region cut of a run over a simulated WAN.
	RegionCuts []RegionCut `json:"region_cuts,omitempty"`
	// Interrupted is true when the run was stopped (Ctrl-C) before its duration ended: the
	// invariants then judge a partial run that was not healed.
	Interrupted bool `json:"interrupted,omitempty"`
}

// OK reports whether every invariant held.
func (r Report) OK() bool {
	for _, res := range r.Invariants {
		if !res.OK {
			return false
		}
	}
	return true
}

// Print writes the summary a person reads.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "chaos: seed %d, %.0fs, %d gateways, %d engines, isolated=%v\n", r.Seed, r.DurationS, r.Nodes, r.Engines, r.Isolated)
	if len(r.Regions) > 0 {
		fmt.Fprintf(w, "chaos: over a simulated WAN: regions %s, %gms one way between regions\n", strings.Join(r.Regions, ","), r.WANDelayMs)
	}
	if r.Interrupted {
		fmt.Fprintln(w, "chaos: interrupted: the invariants judge a partial run that was not healed")
	}
	printCounts(w, "faults", r.Faults, "%d", true)
	printCounts(w, "refused", r.Refused, "%d", false)
	printCounts(w, "fault seconds", r.FaultSeconds, "%.0f", false)
	printCounts(w, "of which coming back", r.BackSeconds, "%.0f", false)
	printCounts(w, "waited for room", r.WaitSeconds, "%.0f", false)
	printCounts(w, "of which for a turn", r.TurnSeconds, "%.0f", false)
	for _, k := range sortedKeys(r.Skipped) {
		fmt.Fprintf(w, "skipped %s: %s\n", k, r.Skipped[k])
	}
	fmt.Fprintf(w, "requests: ok=%d failed_no_worker=%d refused_drained=%d failed_gateway=%d gateway_down=%d\n",
		r.Requests.OK, r.Requests.NoWorker, r.Requests.Drained, r.Requests.GatewayLost, r.Requests.GatewayDown)
	printCounts(w, "lost by cause", r.LostByCause, "%d", false)
	printCuts(w, r.RegionCuts)
	fmt.Fprintf(w, "admin:")
	for _, k := range sortedKeys(r.AdminOps) {
		fmt.Fprintf(w, " %s=%d", k, r.AdminOps[k])
	}
	fmt.Fprintln(w)
	for _, k := range sortedKeys(r.Invariants) {
		res, verdict := r.Invariants[k], "ok  "
		if !res.OK {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "%s %-20s %s\n", verdict, k, res.Detail)
	}
}

// printCounts writes one line, "label: kind=N ...", in the order of the kinds; an empty m
// writes nothing unless always.
func printCounts[V int | float64](w io.Writer, label string, m map[string]V, format string, always bool) {
	if len(m) == 0 && !always {
		return
	}
	fmt.Fprintf(w, "%s:", label)
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(w, " %s="+format, k, m[k])
	}
	fmt.Fprintln(w)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Kinds lists every fault kind FAULTS may name.
func Kinds() []string { return append([]string(nil), nemesis.All...) }
