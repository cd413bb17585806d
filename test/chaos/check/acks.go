package check

import (
	"slices"
	"sort"

	"github.com/meshgw/meshgw/test/chaos/history"
)

// flagWrite is a write that may have set a worker's disabled flag to val.
type flagWrite struct {
	val              bool
	acked            bool // answered: it took effect at some point in [invoke, complete]
	invoke, complete int64
	lagging          []string
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
		out[a.Worker] = append(out[a.Worker], flagWrite{val: val, acked: acked, invoke: int64(a.Invoke), complete: complete, lagging: a.Lagging})
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
// acknowledged was served by that worker, unless an enable may have taken effect since (one
// answered after the disable was invoked and invoked before the request returned), or the
// gateway was among those the disable's fleet_ack named lagging.
func NoDisabledRouting(h history.History) Result {
	var bad examples
	writes := flagWrites(h)
	checked := 0
	for _, q := range h.Requests {
		if q.Worker == "" {
			continue
		}
		followed := false
		for _, d := range writes[q.Worker] {
			if !d.acked || !d.val || d.complete >= int64(q.Invoke) || slices.Contains(d.lagging, q.Gateway) {
				continue
			}
			followed = true
			enabled := false
			for _, e := range writes[q.Worker] {
				if !e.val && e.complete > d.invoke && e.invoke < int64(q.Complete) {
					enabled = true
					break
				}
			}
			if !enabled {
				bad.add("a request through %s at %v reached %s, disabled and acknowledged at %v", q.Gateway, q.Invoke, q.Worker, history.Duration(d.complete))
				break
			}
		}
		if followed {
			checked++
		}
	}
	if bad.n > 0 {
		return Fail("%d requests reached a disabled worker: %s", bad.n, bad.String())
	}
	return Pass("of %d requests, %d followed an acknowledged disable of their worker, and none reached it", len(h.Requests), checked)
}
