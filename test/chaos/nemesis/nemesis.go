// Package nemesis injects the faults of a chaos run, drawn from the run's seed, on lanes that
// run side by side (process faults, network faults, admin faults, engine faults, weight
// faults) under rules that keep the cluster able to make progress: kill -9 and a restart on
// the same state directory, SIGSTOP/SIGCONT, loss of a state directory, drains, partitions,
// forced leader changes, flapping and hanging engines, failing weight updates; and it says
// which faults it skipped and why.
package nemesis

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/meshgw/meshgw/test/chaos/cluster"
	"github.com/meshgw/meshgw/test/chaos/history"
)

// The fault kinds, as FAULTS names them.
const (
	Kill              = "kill"
	Pause             = "pause"
	Wipe              = "wipe"
	PartitionOne      = "partition-one"
	PartitionMinority = "partition-minority"
	PartitionMajority = "partition-majority"
	PartitionOneWay   = "partition-oneway"
	EngineFlap        = "engine-flap"
	EngineHang        = "engine-hang"
	WeightFail        = "weight-fail"
	LeaderTransfer    = "leader-transfer"
	Drain             = "drain"
	ClockJump         = "clock-jump"
)

// engineKinds are the faults of engines; the others hit gateways.
var engineKinds = []string{EngineFlap, EngineHang, WeightFail}

// All is every kind, in the order the report lists them.
var All = []string{Kill, Pause, Wipe, PartitionOne, PartitionMinority, PartitionMajority, PartitionOneWay,
	EngineFlap, EngineHang, WeightFail, LeaderTransfer, Drain, ClockJump}

// Nemesis injects faults into a cluster.
type Nemesis struct {
	C   *cluster.Cluster
	Net *cluster.Net // nil when the run is not isolated: partitions are skipped
	Rec *history.Recorder
	Rng *rand.Rand
	Log func(format string, args ...any)
	// WeightEngine is the engine whose weight updates WeightFail makes fail ("" for none).
	WeightEngine string
	// Hold sets how long a fault lasts: drawn in [Hold/3, Hold/2], and one fault in ten in
	// [2×Hold, 3×Hold] (long enough for a failover: the failure detector and the grace).
	Hold time.Duration
	// Regions, when set, is the simulated WAN the run is over: partition-one cuts the target's
	// whole region off (wan.Net.Cut), and the partitions the WAN cannot express are skipped.
	Regions Regions
	// CutHold, when > 0, is how long every region cut holds, instead of a drawn hold.
	CutHold time.Duration
	// OnCut, when set, is called as soon as a region is cut off, with its gateways; the function
	// it returns is called right after the region is healed.
	OnCut func(region string, gateways []*cluster.Node) (healed func())
	// Stop ends the heals' waits (restarts, a gateway back): the run was interrupted. Nil means
	// they run to their bounds.
	Stop context.Context

	room *room

	mu      sync.Mutex
	counts  map[string]int
	refused map[string]int
	took    map[string]time.Duration
	waited  map[string]time.Duration
	back    map[string]time.Duration
	turns   map[string]time.Duration
	skipped map[string]string
	errs    []string
}

// Plan splits kinds into those it will run and those it skips, with the reason of each skip.
func (n *Nemesis) Plan(kinds []string) (run []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.counts, n.skipped = map[string]int{}, map[string]string{}
	n.refused, n.took, n.waited = map[string]int{}, map[string]time.Duration{}, map[string]time.Duration{}
	n.back, n.turns = map[string]time.Duration{}, map[string]time.Duration{}
	for _, k := range kinds {
		if why := n.skipReason(k); why != "" {
			n.skipped[k] = why
			continue
		}
		n.counts[k] = 0
		run = append(run, k)
	}
	return run
}

// Regions cuts whole regions of a simulated WAN off and heals them (test/wan's Net).
type Regions interface {
	Cut(r int)
	Heal(r int)
	Region(name string) int
}

// wanSkips are the kinds a run over a simulated WAN skips, and why: the bed cuts a whole
// region, both ways, and nothing finer.
var wanSkips = map[string]string{
	PartitionMinority: "over a simulated WAN (--regions) the test bed cuts whole regions off, both ways (wan.Cut); a minority of chosen gateways has no such form (partition-one cuts the target's region)",
	PartitionMajority: "over a simulated WAN (--regions) the test bed cuts whole regions off, both ways (wan.Cut); a bridge between two halves needs per-link cuts",
	PartitionOneWay:   "over a simulated WAN (--regions) the test bed cuts whole regions off, both ways (wan.Cut); it has no one-way cut",
	LeaderTransfer:    "over a simulated WAN (--regions) the forced leader change has no form: it drops the leader's raft packets with iptables in each gateway's own namespace, and the gateways of a region share one (their traffic to each other never crosses a link)",
}

func (n *Nemesis) skipReason(k string) string {
	if why, ok := wanSkips[k]; ok && n.Regions != nil {
		return why
	}
	if k == PartitionOne && n.Regions != nil {
		return ""
	}
	switch k {
	case PartitionOne, PartitionMinority, PartitionMajority, PartitionOneWay:
		if n.Net == nil {
			return "not isolated (that needs root, ip, iptables and nsenter, and no --no-isolate): the run is on the host's loopback, where partitions would need rules on the host"
		}
	case Wipe:
		if len(n.C.Nodes) < 3 {
			return "a wiped node of a cluster under 3 nodes has no quorum to rejoin"
		}
	case WeightFail:
		if n.WeightEngine == "" {
			return "no engine is set apart for weight updates (ENGINES < 3)"
		}
	case LeaderTransfer:
		if n.Net == nil {
			return "not isolated: the forced leader change cuts the leader's raft port with iptables (meshgw has no route that moves only the leadership)"
		}
		if len(n.C.Nodes) < 3 {
			return "a leader change needs two other voters"
		}
	case Drain:
		if !routeExists(n.C, "/mesh/drain") {
			return "this build has no POST /mesh/drain"
		}
		if len(n.C.Nodes) < 2 {
			return "a drain needs another gateway to hand over to"
		}
	case ClockJump:
		return "no clean way to jump one gateway's clock: Go reads time through the vDSO, so libfaketime's LD_PRELOAD does not reach it, and a time namespace offsets only CLOCK_MONOTONIC/BOOTTIME, once, before the process starts"
	default:
		if !slices.Contains(All, k) {
			return "unknown fault kind"
		}
	}
	return ""
}

// routeExists tells a route from a missing one without calling it: a GET of a POST-only route
// answers 405, of a missing one 404.
func routeExists(c *cluster.Cluster, path string) bool {
	for _, node := range c.Nodes {
		if code := cluster.Status(node.URL()+path, cluster.AdminKey); code != 0 {
			return code != 404
		}
	}
	return false
}

// Counts returns how many faults of each kind ran.
func (n *Nemesis) Counts() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]int{}
	for k, v := range n.counts {
		out[k] = v
	}
	return out
}

// Skipped returns the kinds skipped and why.
func (n *Nemesis) Skipped() map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]string{}
	for k, v := range n.skipped {
		out[k] = v
	}
	return out
}

// Errors returns what went wrong injecting or healing faults (a node that would not restart,
// a wiped node that did not come back as a new member).
func (n *Nemesis) Errors() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.errs...)
}

func (n *Nemesis) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	n.say("%s", msg)
	n.mu.Lock()
	n.errs = append(n.errs, msg)
	n.mu.Unlock()
}

// say logs a nemesis line with the run's time.
func (n *Nemesis) say(format string, args ...any) {
	n.Log("nemesis: %5.1fs "+format, append([]any{n.Rec.Now().Seconds()}, args...)...)
}

func (n *Nemesis) count(k string) {
	n.mu.Lock()
	n.counts[k]++
	n.mu.Unlock()
}

// refuse counts a fault that did not take (a drain the cluster refused, a leader that did not
// move): it is not in Counts.
func (n *Nemesis) refuse(k string) {
	n.mu.Lock()
	n.refused[k]++
	n.mu.Unlock()
	n.room.refused(k)
}

// Refused returns how many faults of each kind did not take.
func (n *Nemesis) Refused() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return maps.Clone(n.refused)
}

// Seconds returns, per kind, the time its faults held their targets (from the injection until
// the targets were back), the part of it after the heal (the targets coming back: a restart
// seen, raft and the mesh reaching them again), the time they waited for room (room.go)
// before, and the part of that wait that was for their turn.
func (n *Nemesis) Seconds() (held, back, waited, turn map[string]float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	round := func(m map[string]time.Duration) map[string]float64 {
		out := map[string]float64{}
		for k, d := range m {
			out[k] = math.Round(d.Seconds()*10) / 10
		}
		return out
	}
	return round(n.took), round(n.back), round(n.waited), round(n.turns)
}

// Held returns the gateways faults hold now, and by which kind.
func (n *Nemesis) Held() map[string]string {
	if n.room == nil {
		return nil
	}
	return n.room.held()
}
