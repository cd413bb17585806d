package check

import (
	"sort"
	"strings"
	"time"

	"github.com/meshgw/meshgw/test/chaos/history"
)

// probeSlack is how long after a gateway's sample said it owns a worker its probes may still
// land (a probe in flight when ownership moved), and how early before.
const probeSlack = 1500 * time.Millisecond

// SingleOwner checks that no two gateways ever named two different owners of one worker at one
// epoch, and that no gateway probed a worker while its own samples on both sides of the probes
// said another gateway owned it.
func SingleOwner(h history.History) Result {
	var bad examples
	type key struct {
		worker string
		epoch  uint64
	}
	owners := map[key]map[string]bool{}
	for _, s := range h.Owners {
		for _, r := range s.Rows {
			k := key{r.Worker, r.Epoch}
			if owners[k] == nil {
				owners[k] = map[string]bool{}
			}
			owners[k][r.Owner] = true
		}
	}
	for k, set := range owners {
		if len(set) > 1 {
			names := make([]string, 0, len(set))
			for o := range set {
				names = append(names, o)
			}
			sort.Strings(names)
			bad.add("%s has owners %s at epoch %d", k.worker, strings.Join(names, " and "), k.epoch)
		}
	}
	probes := strayProbes(h, &bad)
	if bad.n > 0 {
		return Fail("%d violations: %s", bad.n, bad.String())
	}
	return Pass("%d (worker, epoch) pairs each had one owner in %d samples; %d probe intervals checked", len(owners), len(h.Owners), probes)
}

// strayProbes adds to bad each gateway that probed a worker between two probe samples while
// every one of its ownership samples around them named another owner; it returns how many
// (worker, gateway, interval) triples it judged.
func strayProbes(h history.History, bad *examples) int {
	byWorker := map[string][]history.ProbeSample{}
	for _, p := range h.Probes {
		byWorker[p.Worker] = append(byWorker[p.Worker], p)
	}
	judged := 0
	for w, ps := range byWorker {
		sort.Slice(ps, func(i, j int) bool { return ps[i].At < ps[j].At })
		for i := 1; i < len(ps); i++ {
			for g, n := range ps[i].Probes {
				if n <= ps[i-1].Probes[g] {
					continue
				}
				seen, owned := ownedAround(h, g, w, ps[i-1].At-probeSlack, ps[i].At+probeSlack)
				if !seen {
					continue
				}
				judged++
				if !owned {
					bad.add("%s probed %s between %v and %v without owning it", g, w, ps[i-1].At.Round(time.Millisecond), ps[i].At.Round(time.Millisecond))
				}
			}
		}
	}
	return judged
}

// ownedAround reports whether gateway g sampled its owners in [from, to], and whether any of
// those samples named g the owner of worker w (or did not list w: a gateway still catching up).
func ownedAround(h history.History, g, w string, from, to time.Duration) (seen, owned bool) {
	for _, s := range h.Owners {
		if s.Gateway != g || s.At < from || s.At > to {
			continue
		}
		seen = true
		listed := false
		for _, r := range s.Rows {
			if r.Worker == w {
				listed = true
				if r.Owner == g {
					return true, true
				}
			}
		}
		if !listed {
			return true, true
		}
	}
	return seen, false
}

// OwnerWithinBound checks that no gateway outside every fault (its view current) named as a
// worker's owner a node that had been down or cut off for longer than grace plus bound.
func OwnerWithinBound(h history.History, grace, bound time.Duration) Result {
	var bad examples
	judged := 0
	limit := grace + bound
	for _, s := range h.Owners {
		if downAt(h, s.Gateway, s.At, true) >= 0 {
			continue
		}
		for _, r := range s.Rows {
			judged++
			if since := downAt(h, r.Owner, s.At, true); since >= 0 && s.At-since > limit {
				bad.add("%s named %s owner of %s at %v, down since %v", s.Gateway, r.Owner, r.Worker, s.At.Round(time.Millisecond), since.Round(time.Millisecond))
			}
		}
	}
	if bad.n > 0 {
		return Fail("%d rows named an owner down past %v (grace %v + bound %v): %s", bad.n, limit, grace, bound, bad.String())
	}
	return Pass("%d ownership rows named an owner that was up, or down for less than %v (grace %v + bound %v)", judged, limit, grace, bound)
}

// downAt returns since when node had been down without a break at t (the start of the
// earliest of the overlapping intervals that cover t), or -1 when it was up. cutOff counts
// partitions (the process serving) as down.
func downAt(h history.History, node string, t time.Duration, cutOff bool) time.Duration {
	since := time.Duration(-1)
	for changed := true; changed; {
		changed = false
		for _, d := range h.Down {
			if d.Node != node || (d.Serving && !cutOff) {
				continue
			}
			at := t
			if since >= 0 {
				at = since
			}
			if d.From <= at && at <= d.To && (since < 0 || d.From < since) {
				since = d.From
				changed = true
			}
		}
	}
	return since
}
