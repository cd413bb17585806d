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
	create           bool // a registration that may have created the record (existWrites)
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
// update's 502, and its 503 journal_unresolved (nothing sent, its record left open), leave its
// targets disabled (an acknowledged disable); its 503 fleet_ack_timeout says it disabled them
// and enabled them again (an acknowledged enable); a
// 200 may have enabled them again (those an operator had disabled before stay disabled); any
// other answer but a refusal may have done either. A registration that created the record
// (201, or unknown once the worker may have been deleted) left it enabled.
func flagWrites(h history.History) map[string][]flagWrite {
	out := map[string][]flagWrite{}
	add := func(a history.AdminOp, val, acked bool) {
		complete := int64(a.Complete)
		if !acked {
			complete = int64(history.Never)
		}
		out[a.Worker] = append(out[a.Worker], flagWrite{val: val, acked: acked, invoke: int64(a.Invoke), complete: complete, ackedBy: a.Acked, lagging: a.Lagging})
	}
	deleted := map[string]bool{}
	for _, a := range h.Admin {
		if a.Kind == history.Delete && a.Outcome != history.Failed {
			deleted[a.Worker] = true
		}
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
		case a.Kind == history.Register && deleted[a.Worker]:
			if a.Outcome == history.Unknown {
				add(a, false, false)
			} else if a.Status == 201 {
				add(a, false, true)
			}
		case a.Kind == history.WeightUpdate:
			switch {
			case a.Status == 502 && a.Code == "weight_update_failed",
				a.Status == 503 && a.Code == "journal_unresolved":
				add(a, true, true)
			case a.Status == 503 && a.Code == "fleet_ack_timeout":
				add(a, false, true)
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

// existWrites returns, per worker, the writes that may have made its record exist (val true: a
// registration) or not (a delete: 202, the record drains and its owner removes it; 200, it is
// gone). A registration that created the record (201, or unknown) has create set.
func existWrites(h history.History) map[string][]flagWrite {
	out := map[string][]flagWrite{}
	for _, a := range h.Admin {
		if a.Outcome == history.Failed || (a.Kind != history.Register && a.Kind != history.Delete) {
			continue
		}
		w := flagWrite{val: a.Kind == history.Register, acked: a.Outcome == history.OK, invoke: int64(a.Invoke),
			complete: int64(a.Complete), ackedBy: a.Acked, lagging: a.Lagging}
		switch {
		case a.Outcome == history.Unknown:
			w.complete, w.create = int64(history.Never), a.Kind == history.Register
		case a.Kind == history.Delete && a.Status == 404:
			continue // nothing to delete: not a write
		case a.Kind == history.Register:
			w.create = a.Status == 201
		}
		out[a.Worker] = append(out[a.Worker], w)
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

// NoLostAck checks the state every gateway lists once the faults healed: every worker's
// existence is one the acknowledged registrations and deletes allow (an acknowledged
// registration is there unless a delete may have come after it, a deleted record is gone
// unless a registration may have come after it), and every listed worker's disabled flag is
// one the acknowledged writes allow. gateways names the gateways that must have answered.
func NoLostAck(h history.History, gateways []string) Result {
	var bad examples
	exist := existWrites(h)
	writes := flagWrites(h)
	workers := make([]string, 0, len(exist))
	registered := 0
	for w, ws := range exist {
		workers = append(workers, w)
		for _, x := range ws {
			if x.val && x.acked {
				registered++
				break
			}
		}
	}
	sort.Strings(workers)
	for _, g := range gateways {
		view, ok := h.Final[g]
		if !ok {
			bad.add("%s did not list its workers at the end", g)
			continue
		}
		for _, w := range workers {
			f := view[w]
			// A record still draining is on its way out (final waits for the drains to end;
			// one that never ends is a heal failure).
			if allowed := allowedFinal(exist[w]); !allowed[f.Found && !f.Draining] {
				if f.Found {
					bad.add("%s lists %s, whose acknowledged delete no registration may have followed", g, w)
				} else {
					bad.add("%s lost the acknowledged registration of %s", g, w)
				}
				continue
			}
			if !f.Found {
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
	deletes := 0
	for _, ws := range exist {
		for _, w := range ws {
			if w.acked && !w.val {
				deletes++
			}
		}
	}
	return Pass("%d gateways hold what %d acknowledged registrations and %d acknowledged deletes of %d workers left, and the flags of %d acknowledged writes",
		len(gateways), registered, deletes, len(workers), acked)
}

// NoDisabledRouting checks that no client request invoked after a disable or a delete of its
// worker was acknowledged was served by that worker through a gateway the acknowledgement
// bound (one its fleet_ack lists as having applied it): after a disable, unless an enable or a
// registration that created the record again may have taken effect since; after a delete (202:
// the record drains, 200: it is gone), unless such a registration may have (one answered after
// the write was invoked and invoked before the request returned). Gateways the acknowledgement
// did not wait for (dead, suspect or cut off in the writer's mesh: the documented carve-out) or
// named lagging are counted in the detail, not failed.
func NoDisabledRouting(h history.History) Result {
	var bad, excused examples
	writes := flagWrites(h)
	exist := existWrites(h)
	type gate struct {
		flagWrite
		what string
	}
	gates := map[string][]gate{}
	for w, ws := range writes {
		for _, d := range ws {
			if d.acked && d.val {
				gates[w] = append(gates[w], gate{d, "disable"})
			}
		}
	}
	for w, ws := range exist {
		for _, d := range ws {
			if d.acked && !d.val {
				gates[w] = append(gates[w], gate{d, "delete"})
			}
		}
	}
	opened := func(w string, d gate, q history.Request) bool {
		for _, e := range exist[w] {
			if e.create && e.complete > d.invoke && e.invoke < int64(q.Complete) {
				return true
			}
		}
		if d.what == "delete" {
			return false // an enable does not end a drain
		}
		for _, e := range writes[w] {
			if !e.val && e.complete > d.invoke && e.invoke < int64(q.Complete) {
				return true
			}
		}
		return false
	}
	for _, q := range h.Requests {
		if q.Worker == "" {
			continue
		}
		for _, d := range gates[q.Worker] {
			if d.complete >= int64(q.Invoke) || opened(q.Worker, d, q) {
				continue
			}
			if !d.binds(q.Gateway) {
				excused.add("%s at %v (not waited for by the %s acknowledged at %v)", q.Gateway, q.Invoke.Round(time.Millisecond), d.what, history.Duration(d.complete))
				break
			}
			bad.add("a request through %s at %v reached %s, whose %s it acknowledged at %v", q.Gateway, q.Invoke.Round(time.Millisecond), q.Worker, d.what, history.Duration(d.complete))
			break
		}
	}
	note := ""
	if excused.n > 0 {
		note = fmt.Sprintf("; %d requests reached a disabled or deleted worker through a gateway the acknowledgement did not wait for: %s", excused.n, excused.String())
	}
	if bad.n > 0 {
		return Fail("%d requests reached a worker after the gateway they went through acknowledged its disable or delete: %s%s", bad.n, bad.String(), note)
	}
	disables, deletes := 0, 0
	for _, gs := range gates {
		for _, g := range gs {
			if g.what == "delete" {
				deletes++
			} else {
				disables++
			}
		}
	}
	return Pass("no request of %d reached a worker through a gateway that had acknowledged its disable or delete (%d acknowledged disables, %d deletes)%s", len(h.Requests), disables, deletes, note)
}
