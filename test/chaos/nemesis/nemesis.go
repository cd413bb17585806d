// Package nemesis injects the faults of a chaos run, one node fault at a time and engine faults
// beside them, each drawn from the run's seed: kill -9 and a restart on the same state
// directory, SIGSTOP/SIGCONT, loss of a state directory, partitions, flapping and hanging
// engines, failing weight updates; and it says which faults it skipped and why.
package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
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

// All is every kind, in the order the report lists them.
var All = []string{Kill, Pause, Wipe, PartitionOne, PartitionMinority, PartitionMajority, PartitionOneWay,
	EngineFlap, EngineHang, WeightFail, LeaderTransfer, Drain, ClockJump}

// nodeKinds are the faults of gateways; the rest hit engines.
var nodeKinds = []string{Kill, Pause, Wipe, Drain, PartitionOne, PartitionMinority, PartitionMajority, PartitionOneWay}

// Nemesis injects faults into a cluster.
type Nemesis struct {
	C   *cluster.Cluster
	Net *cluster.Net // nil when the run is not isolated: partitions are skipped
	Rec *history.Recorder
	Rng *rand.Rand
	Log func(format string, args ...any)
	// WeightEngine is the engine whose weight updates WeightFail makes fail ("" for none).
	WeightEngine string
	// Hold bounds how long a fault lasts, drawn in [Hold/4, Hold].
	Hold time.Duration
	// Stop ends the heals' waits (restarts, a gateway back): the run was interrupted. Nil means
	// they run to their bounds.
	Stop context.Context

	// quiet keeps partitions off while a wiped node comes back: partitions hold it shared, a
	// wipe alone.
	quiet sync.RWMutex

	mu      sync.Mutex
	counts  map[string]int
	skipped map[string]string
	errs    []string
}

// Plan splits kinds into those it will run and those it skips, with the reason of each skip.
func (n *Nemesis) Plan(kinds []string) (run []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.counts, n.skipped = map[string]int{}, map[string]string{}
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

func (n *Nemesis) skipReason(k string) string {
	switch k {
	case PartitionOne, PartitionMinority, PartitionMajority, PartitionOneWay:
		if n.Net == nil {
			return "not isolated (that needs root, ip and iptables, and no --no-isolate): the run is on the host's loopback, where partitions would need rules on the host"
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
		return "meshgw has no route that moves only the raft leadership; a drain of the leader hands it over (the drain fault targets the leader half of the time)"
	case Drain:
		if !routeExists(n.C, "/mesh/drain") {
			return "this build has no POST /mesh/drain (issue 15)"
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
	n.Log("nemesis: %s", msg)
	n.mu.Lock()
	n.errs = append(n.errs, msg)
	n.mu.Unlock()
}

func (n *Nemesis) count(k string) {
	n.mu.Lock()
	n.counts[k]++
	n.mu.Unlock()
}

// Run injects the planned faults until ctx ends: process faults, partitions and engine faults
// on three loops side by side, each one fault at a time; each fault is healed before Run
// returns.
func (n *Nemesis) Run(ctx context.Context, kinds []string) {
	var nodes, engines []string
	for _, k := range kinds {
		if slices.Contains(nodeKinds, k) {
			nodes = append(nodes, k)
		} else {
			engines = append(engines, k)
		}
	}
	sort.Strings(nodes)
	sort.Strings(engines)
	// The engine loop draws from its own generator, seeded from the run's, so that the node
	// faults' draws do not depend on the timing of the engine faults'.
	erng := rand.New(rand.NewPCG(n.Rng.Uint64(), n.Rng.Uint64()))
	var wg sync.WaitGroup
	if len(engines) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.engineLoop(ctx, erng, engines)
		}()
	}
	if len(nodes) > 0 {
		n.nodeLoop(ctx, nodes)
	}
	wg.Wait()
}

// stop is the context of the heals' waits.
func (n *Nemesis) stop() context.Context {
	if n.Stop == nil {
		return context.Background()
	}
	return n.Stop
}

// hold draws a fault's length.
func hold(rng *rand.Rand, max time.Duration) time.Duration {
	return max/4 + time.Duration(rng.Int64N(int64(max-max/4)+1))
}

// wait waits d, or less when ctx ends (faults are healed at once then).
func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
