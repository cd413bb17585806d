package check

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/meshgw/meshgw/test/chaos/history"
)

// flagWrite is a write that may have set a worker's disabled flag to val.
type flagWrite struct {
	val              bool
	acked            bool // answered: it took effect at some point in [invoke, complete]
	invoke, complete int64
	ackedBy, lagging []string // the fleet_ack's lists; ackedBy nil when the answer had none
}

// binds reports whether the write's acknowledgement binds gateway g: g applied it before the
// answer (or, without a fleet_ack, was not named lagging).
func (w flagWrite) binds(g string) bool {
	if slices.Contains(w.lagging, g) {
		return false
	}
	return w.ackedBy == nil || slices.Contains(w.ackedBy, g)
}

// flagWrites returns, per worker, the writes that may have set its disabled flag. A weight
// update's 502 leaves its targets disabled (an acknowledged disable); a 200 may have enabled
// them again (those an operator had disabled before stay disabled); any other answer but a
// refusal may have done either.
func flagWrites(h history.History) map[string][]flagWrite {
	out := map[string][]flagWrite{}
	add := func(a history.AdminOp, val, acked bool) {
		complete := int64(a.Complete)
		if !acked {
			complete = int64(history.Never)
		}
		out[a.Worker] = append(out[a.Worker], flagWrite{val: val, acked: acked, invoke: int64(a.Invoke), complete: complete, ackedBy: a.Acked, lagging: a.Lagging})
	}
	for _, a := range h.Admin {
		switch {
		case a.Outcome == history.Failed:
		case a.Kind == history.Disable || a.Kind == history.Enable:
			if a.Outcome == history.Unknown {
				add(a, a.Kind == history.Disable, false)
			} else if a.Status == 200 {
				add(a, a.Kind == history.Disable, true)
			}
		case a.Kind == history.WeightUpdate:
			switch {
			case a.Status == 502 && a.Code == "weight_update_failed":
				add(a, true, true)
			case a.Status == 200:
				add(a, false, false)
			case a.Status == 409 || a.Status == 400:
			default:
				add(a, true, false)
				add(a, false, false)
			}
		}
	}
	return out
}

// allowedFinal is the set of disabled values a worker may end with: the value of the
// acknowledged write that returned last, or of any write that may have taken effect after it
// (one invoked before it returned and not answered before it was invoked). With no
// acknowledged write, the registered default (enabled) or any unacknowledged write.
func allowedFinal(ws []flagWrite) map[bool]bool {
	var last *flagWrite
	for i := range ws {
		if ws[i].acked && (last == nil || ws[i].complete > last.complete) {
			last = &ws[i]
		}
	}
	allowed := map[bool]bool{}
	if last == nil {
		allowed[false] = true
		for _, w := range ws {
			allowed[w.val] = true
		}
		return allowed
	}
	allowed[last.val] = true
	for i := range ws {
		if &ws[i] != last && ws[i].complete > last.invoke {
			allowed[ws[i].val] = true
		}
	}
	return allowed
}

// NoLostAck checks the state every gateway lists once the faults healed: every acknowledged
// registration is there, and every worker's disabled flag is one the acknowledged writes
// allow. gateways names the gateways that must have answered.
func NoLostAck(h history.History, gateways []string) Result {
	var bad examples
	registered := map[string]bool{}
	for _, a := range h.Admin {
		if a.Kind == history.Register && a.Outcome == history.OK {
			registered[a.Worker] = true
		}
	}
	writes := flagWrites(h)
	for _, g := range gateways {
		view, ok := h.Final[g]
		if !ok {
			bad.add("%s did not list its workers at the end", g)
			continue
		}
		workers := make([]string, 0, len(registered))
		for w := range registered {
			workers = append(workers, w)
		}
		sort.Strings(workers)
		for _, w := range workers {
			f := view[w]
			if !f.Found {
				bad.add("%s lost the acknowledged registration of %s", g, w)
				continue
			}
			if allowed := allowedFinal(writes[w]); !allowed[f.Disabled] {
				bad.add("%s lists %s disabled=%v, which no acknowledged or unknown write left", g, w, f.Disabled)
			}
		}
	}
	if bad.n > 0 {
		return Fail("%d lost acknowledgements: %s", bad.n, bad.String())
	}
	acked := 0
	for _, ws := range writes {
		for _, w := range ws {
			if w.acked {
				acked++
			}
		}
	}
	return Pass("%d gateways hold %d acknowledged registrations and the flags of %d acknowledged writes", len(gateways), len(registered), acked)
}

// NoDisabledRouting checks that no client request invoked after a disable of its worker was
// acknowledged was served by that worker through a gateway the acknowledgement bound (one its
// fleet_ack lists as having applied the disable), unless an enable may have taken effect since
// (one answered after the disable was invoked and invoked before the request returned).
// Gateways the acknowledgement did not wait for (dead, suspect or cut off in the writer's
// mesh: the documented carve-out) or named lagging are counted in the detail, not failed.
func NoDisabledRouting(h history.History) Result {
	var bad, excused examples
	writes := flagWrites(h)
	for _, q := range h.Requests {
		if q.Worker == "" {
			continue
		}
		for _, d := range writes[q.Worker] {
			if !d.acked || !d.val || d.complete >= int64(q.Invoke) {
				continue
			}
			enabled := false
			for _, e := range writes[q.Worker] {
				if !e.val && e.complete > d.invoke && e.invoke < int64(q.Complete) {
					enabled = true
					break
				}
			}
			if enabled {
				continue
			}
			if !d.binds(q.Gateway) {
				excused.add("%s at %v (not waited for by the disable acknowledged at %v)", q.Gateway, q.Invoke.Round(time.Millisecond), history.Duration(d.complete))
				break
			}
			bad.add("a request through %s at %v reached %s, disabled and acknowledged by it at %v", q.Gateway, q.Invoke.Round(time.Millisecond), q.Worker, history.Duration(d.complete))
			break
		}
	}
	note := ""
	if excused.n > 0 {
		note = fmt.Sprintf("; %d requests reached a disabled worker through a gateway the acknowledgement did not wait for: %s", excused.n, excused.String())
	}
	if bad.n > 0 {
		return Fail("%d requests reached a worker after the gateway they went through acknowledged its disable: %s%s", bad.n, bad.String(), note)
	}
	disables := 0
	for _, ws := range writes {
		for _, w := range ws {
			if w.acked && w.val {
				disables++
			}
		}
	}
	return Pass("no request of %d reached a worker through a gateway that had acknowledged its disable (%d acknowledged disables)%s", len(h.Requests), disables, note)
}
