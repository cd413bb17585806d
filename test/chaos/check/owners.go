package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/meshgw/meshgw/test/chaos/history"
)

// probeSlack is how long after a gateway's sample said it owns a worker its probes may still
// land (a probe in flight when ownership moved), and how early before.
const probeSlack = 1500 * time.Millisecond

// probeTimeout is the gateways' health-probe timeout in the chaos run (--health-check-timeout-secs,
// its default 5): how long a probe a gateway sent may still be on its way. A partition holds its
// packets and TCP delivers them on a retransmission after the heal, so one probe sent while its
// sender owned the worker may reach the engine that long after (lateProbe).
const probeTimeout = 5 * time.Second

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
	var stale, moved, late examples
	probes := strayProbes(h, &bad, &stale, &moved, &late)
	note := ""
	if stale.n > 0 {
		note += fmt.Sprintf("; %d probes came from a former owner on a stale view (a pause or partition ended before it applied the failover): %s", stale.n, stale.String())
	}
	if moved.n > 0 {
		note += fmt.Sprintf("; %d probes fell in an interval in which ownership moved more often than the samples show: %s", moved.n, moved.String())
	}
	if late.n > 0 {
		note += fmt.Sprintf("; %d single probes arrived late, sent while their gateway owned the worker (a sample named it the owner within a probe's timeout before, or during a cut of its region or of the worker's that ended no longer ago than it lasted: TCP retransmits what a cut held with a doubling backoff): %s", late.n, late.String())
	}
	if bad.n > 0 {
		return Fail("%d violations: %s%s", bad.n, bad.String(), note)
	}
	return Pass("%d (worker, epoch) pairs each had one owner in %d samples; %d probe intervals checked%s", len(owners), len(h.Owners), probes, note)
}

// strayProbes adds to bad each gateway that probed a worker between two probe samples while
// none of its own ownership samples that could describe its state then named it the owner: its
// last sample before the interval (however old: a paused or cut-off gateway's state does not
// move) and those within it. A gateway whose state was stale but named it owner (it resumed
// from a pause, or a partition healed, and probed before it applied the failover) is counted in
// stale; one whose epoch of w changed between g's samples around the interval may have come
// from an owner no sample saw, and is counted in moved. It returns how many (worker, gateway,
// interval) triples it judged.
func strayProbes(h history.History, bad, stale, moved, late *examples) int {
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
				seen, owned := ownedAround(h, g, w, ps[i-1].At, ps[i].At+probeSlack)
				if !seen {
					continue
				}
				judged++
				from, to := ps[i-1].At.Round(time.Millisecond), ps[i].At.Round(time.Millisecond)
				why := ""
				if !owned && n-ps[i-1].Probes[g] == 1 {
					why = lateProbe(h, g, w, ps[i-1].At)
				}
				switch {
				case !owned && (epochMoved(h, g, w, ps[i-1].At, ps[i].At) || movedTo(h, g, w, ps[i-1].At, ps[i].At+probeSlack)):
					// The epoch changed in between: an owner the samples never saw (a transfer
					// to g and a drain away, within a second) may have been g; or another
					// gateway already named g the owner at a newer epoch than g's last sample
					// (g applied the move and probed at once, and took no sample in time).
					moved.add("%s probed %s between %v and %v while its ownership moved", g, w, from, to)
				case why != "":
					late.add("%s probed %s between %v and %v (%s)", g, w, from, to, why)
				case !owned:
					bad.add("%s probed %s between %v and %v without owning it", g, w, from, to)
				case ownerAt(h, w, ps[i-1].At) != g && ownerAt(h, w, ps[i-1].At) != "":
					stale.add("%s probed %s between %v and %v on a stale view that named it owner", g, w, from, to)
				}
			}
		}
	}
	return judged
}

// ownedAround reads gateway g's ownership samples that may describe its state between from and
// to: its last sample at or before from, and those in (from, to]. seen: there is one; owned:
// one names g the owner of w (or does not list w: a gateway still catching up).
func ownedAround(h history.History, g, w string, from, to time.Duration) (seen, owned bool) {
	var before *history.OwnerSample
	for i := range h.Owners {
		s := &h.Owners[i]
		switch {
		case s.Gateway != g || s.At > to:
		case s.At <= from:
			if before == nil || s.At > before.At {
				before = s
			}
		default:
			seen = true
			owned = owned || owns(*s, g, w)
		}
	}
	if before != nil {
		seen = true
		owned = owned || owns(*before, g, w)
	}
	return seen, owned
}

// epochMoved reports whether w's epoch changed between gateway g's last sample at or before from
// and g's samples in (from, to+probeSlack]: one of them shows another epoch. A sample inside the
// interval counts as much as one after it (the samplers of ownership and of probes tick apart, so
// g's sample of the same tick may come a few milliseconds before the probe sample).
// After g's last sample (killed or restarted right after the probe, or before it), the other
// gateways' samples in the window decide: one showing a newer epoch than g's last says w moved in
// the part of the interval g's samples do not cover. Without a sample of g before, it says no:
// the probe is judged by the samples there are.
func epochMoved(h history.History, g, w string, from, to time.Duration) bool {
	var before *history.OwnerSample
	var mine, others []history.OwnerSample
	for i := range h.Owners {
		s := &h.Owners[i]
		inWindow := s.At > from && s.At <= to+probeSlack
		switch {
		case s.Gateway != g:
			if inWindow {
				others = append(others, *s)
			}
		case s.At <= from && (before == nil || s.At > before.At):
			before = s
		case inWindow:
			mine = append(mine, *s)
		}
	}
	if before == nil {
		return false
	}
	b, lastAt := epochOf(*before, w), before.At
	for _, s := range mine {
		if e := epochOf(s, w); e != b {
			return true
		}
		lastAt = max(lastAt, s.At)
	}
	return slices.ContainsFunc(others, func(s history.OwnerSample) bool {
		return s.At > lastAt && epochOf(s, w) > b
	})
}

// movedTo reports whether a sample of any gateway taken in (from, to] names g the owner of w at
// an epoch newer than g's last sample at or before from showed: raft had moved w to g, and g
// may have applied it before its own next sample.
func movedTo(h history.History, g, w string, from, to time.Duration) bool {
	var before *history.OwnerSample
	for i := range h.Owners {
		s := &h.Owners[i]
		if s.Gateway == g && s.At <= from && (before == nil || s.At > before.At) {
			before = s
		}
	}
	if before == nil {
		return false
	}
	seen := epochOf(*before, w)
	for _, s := range h.Owners {
		if s.At <= from || s.At > to {
			continue
		}
		for _, r := range s.Rows {
			if r.Worker == w && r.Owner == g && r.Epoch > seen {
				return true
			}
		}
	}
	return false
}

// lateProbe reports whether a single probe of w by g counted after from may have been sent
// while g owned w (in any gateway's samples, g's own stale view included) and arrived late:
//   - a sample taken within probeTimeout before from names g the owner (g's own samples may
//     never show it: it was paused or cut off while it held w); or
//   - g was cut off (a partition or a region cut: its process ran), or the region of w's engine
//     was cut off (over a simulated WAN: the packets between them crossed the cut either way),
//     from a to b, before from, a sample within a probe's timeout of the cut names g the owner,
//     and from comes no later after b than the cut lasted (plus a probe's timeout): TCP
//     retransmits the data a cut held with a doubling backoff, so the first retransmission after
//     the heal may come as late as the cut was long. The kernel keeps retransmitting after the
//     prober gave up at its timeout and closed the connection: a closed socket still delivers
//     what it had sent.
//
// It says which ("" when neither), for the detail.
func lateProbe(h history.History, g, w string, from time.Duration) string {
	if at, ok := namedOwner(h, g, w, from-probeTimeout, from); ok {
		return fmt.Sprintf("named the owner at %v", at.Round(time.Millisecond))
	}
	for _, d := range h.Down {
		if d.Node != g || !d.Serving {
			continue
		}
		if at, ok := heldByCut(h, g, w, d.From, d.To, from); ok {
			return fmt.Sprintf("cut off from %v to %v, named the owner at %v", d.From.Round(time.Millisecond), d.To.Round(time.Millisecond), at.Round(time.Millisecond))
		}
	}
	for _, c := range h.Cuts {
		if !slices.Contains(c.Workers, w) {
			continue
		}
		if at, ok := heldByCut(h, g, w, c.From, c.To, from); ok {
			return fmt.Sprintf("the worker's region %s cut off from %v to %v, named the owner at %v", c.Region, c.From.Round(time.Millisecond), c.To.Round(time.Millisecond), at.Round(time.Millisecond))
		}
	}
	return ""
}

// heldByCut reports whether a probe of w by g counted after from may be one a cut from a to b
// held: the cut is over by from, from comes no later after b than the cut lasted (plus a
// probe's timeout), and a sample within a probe's timeout of the cut names g the owner: it
// returns the first such sample's time.
func heldByCut(h history.History, g, w string, a, b, from time.Duration) (time.Duration, bool) {
	if b == history.Never || b > from || from > b+(b-a)+probeTimeout {
		return 0, false
	}
	return namedOwner(h, g, w, a-probeTimeout, b+probeTimeout)
}

// namedOwner reports whether a sample of any gateway taken in [from, to] names g the owner of w,
// and when the first did.
func namedOwner(h history.History, g, w string, from, to time.Duration) (time.Duration, bool) {
	first, found := time.Duration(0), false
	for _, s := range h.Owners {
		if s.At < from || s.At > to || found && s.At >= first {
			continue
		}
		for _, r := range s.Rows {
			if r.Worker == w && r.Owner == g {
				first, found = s.At, true
				break
			}
		}
	}
	return first, found
}

func epochOf(s history.OwnerSample, w string) uint64 {
	for _, r := range s.Rows {
		if r.Worker == w {
			return r.Epoch
		}
	}
	return 0
}

// owns reports whether sample s names g the owner of w, or does not list w.
func owns(s history.OwnerSample, g, w string) bool {
	for _, r := range s.Rows {
		if r.Worker == w {
			return r.Owner == g
		}
	}
	return true
}

// ownerAt is the owner of w at the highest epoch any gateway's sample showed by t ("" when none).
func ownerAt(h history.History, w string, t time.Duration) string {
	owner, epoch := "", uint64(0)
	for _, s := range h.Owners {
		if s.At > t {
			continue
		}
		for _, r := range s.Rows {
			if r.Worker == w && r.Epoch >= epoch {
				owner, epoch = r.Owner, r.Epoch
			}
		}
	}
	return owner
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
