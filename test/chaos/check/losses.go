package check

import (
	"slices"
	"sort"
	"time"

	"github.com/meshgw/meshgw/test/chaos/history"
	"github.com/meshgw/meshgw/test/chaos/nemesis"
)

// The causes of a lost request: one the client sent to a running gateway and that was not
// served, other than a 503 no_available_workers (every worker gone) or a drained gateway's 503
// draining, which are counted apart and not lost.
const (
	// CauseShutdown: the gateway's process was killed, stopped or restarted while the request
	// ran (the requests' gateway_down).
	CauseShutdown = "shutdown"
	// CauseEngineHang: the request waited on an engine that hung (it accepts and never
	// answers): a 504 naming a worker whose engine hung during the request, a stream from such a
	// worker that began (200) and ended in an error, or no answer at all within the client's
	// timeout while an engine hung.
	CauseEngineHang = "engine_hang"
	// CauseEngineError: a worker's own error answer (a 5xx, or a stream that ended with an
	// error) passed to the client, from an engine under engine-flap during the request: the
	// retries found no worker that answered better.
	CauseEngineError = "engine_error"
	// CauseRegionCut: over a simulated WAN, the request ran while its gateway's region (its
	// client's) or the region of the worker its answer names was cut off from the others, and
	// no cause above applies: the cut, not a gateway's fault, lost it.
	CauseRegionCut = "region_cut"
	// CauseGatewayFault: every other lost request, the data plane's own.
	CauseGatewayFault = "gateway_fault"
)

// Loss is one lost request and its cause.
type Loss struct {
	Request history.Request
	Cause   string
	// Hang is the index in the history's Engines of the hang it went into (CauseEngineHang),
	// -1 otherwise.
	Hang int
}

// Losses classifies every lost request of the history by cause (the Cause* constants), in
// the history's order. timeout is the gateways' request timeout.
func Losses(h history.History, timeout time.Duration) []Loss {
	var out []Loss
	for _, q := range h.Requests {
		switch q.Class {
		case history.Served, history.NoWorker, history.Drained:
			continue
		}
		l := Loss{Request: q, Cause: CauseGatewayFault, Hang: -1}
		switch {
		case downDuring(h, q.Gateway, q.Invoke, q.Complete):
			l.Cause = CauseShutdown
		case q.Status == 504 || q.Status == 0:
			if i := hangDuring(h, q, timeout); i >= 0 {
				l.Cause, l.Hang = CauseEngineHang, i
			}
		case q.Status == 200 && q.Worker != "" && hangDuring(h, q, timeout) >= 0:
			// A stream whose worker answered only as its hang ended: the gateway's request
			// timeout, which the hang had used up, cut it after its 200 (an error event).
			l.Cause, l.Hang = CauseEngineHang, hangDuring(h, q, timeout)
		case q.Worker != "" && (q.Status >= 500 || q.Status == 200) &&
			faultDuring(h, history.EngineFault{Worker: q.Worker, Kind: nemesis.EngineFlap}, q.Invoke, q.Complete) >= 0:
			l.Cause = CauseEngineError
		}
		if l.Cause == CauseGatewayFault && cutDuring(h, q) {
			l.Cause = CauseRegionCut
		}
		out = append(out, l)
	}
	return out
}

// cutDuring reports whether a region cut met the request and held its gateway or the worker
// its answer names.
func cutDuring(h history.History, q history.Request) bool {
	for _, c := range h.Cuts {
		if c.From <= q.Complete && q.Invoke <= c.To &&
			(slices.Contains(c.Gateways, q.Gateway) || q.Worker != "" && slices.Contains(c.Workers, q.Worker)) {
			return true
		}
	}
	return false
}

// hangDuring returns the index of the hang a request that got a 504, or no answer, waited on:
// one of the worker its answer names, or, with no answer at all, of any engine, during which
// the request waited at least the request timeout. -1 when there is none.
func hangDuring(h history.History, q history.Request, timeout time.Duration) int {
	if q.Worker != "" {
		return faultDuring(h, history.EngineFault{Worker: q.Worker, Kind: nemesis.EngineHang}, q.Invoke, q.Complete)
	}
	if q.Complete-q.Invoke < timeout {
		return -1
	}
	return faultDuring(h, history.EngineFault{Kind: nemesis.EngineHang}, q.Invoke, q.Complete)
}

// faultDuring returns the index of the first engine fault of like's kind (and like's worker,
// when set) whose interval meets [from, to]; -1 when none does.
func faultDuring(h history.History, like history.EngineFault, from, to time.Duration) int {
	for i, f := range h.Engines {
		if f.Kind == like.Kind && (like.Worker == "" || f.Worker == like.Worker) && f.From <= to && from <= f.To {
			return i
		}
	}
	return -1
}

// LostByCause counts losses by cause, every cause present (at zero when none); region_cut only
// when some loss has it (a run over a WAN adds it at zero: chaos.LostByCause).
func LostByCause(losses []Loss) map[string]int {
	out := map[string]int{CauseShutdown: 0, CauseEngineHang: 0, CauseEngineError: 0, CauseGatewayFault: 0}
	for _, l := range losses {
		out[l.Cause]++
	}
	return out
}

// NoGatewayFault checks that no lost request is left without a cause outside the gateway: a
// request lost to the data plane's own fault.
func NoGatewayFault(losses []Loss) Result {
	var bad examples
	for _, l := range losses {
		if l.Cause == CauseGatewayFault {
			q := l.Request
			bad.add("through %s at %v: status %d from worker %q after %v", q.Gateway, q.Invoke.Round(time.Millisecond),
				q.Status, q.Worker, (q.Complete - q.Invoke).Round(time.Millisecond))
		}
	}
	if bad.n > 0 {
		return Fail("%d lost requests have no cause outside the gateway: %s", bad.n, bad.String())
	}
	return Pass("none of %d lost requests was the data plane's own fault", len(losses))
}

// HangLosses checks that no gateway lost a request to an engine hang that it sent after one of
// its requests into that hang had come back timed out: by then the gateway knew of the hang
// (it holds the worker out of its routing at its first timeout). The detail also gives the
// goal of one lost request per gateway per hang: a gateway's requests already in flight to the
// engine when it hung (the workload's two client loops per gateway) all wait out the same
// timeout, and are lost when no other worker is routable for their retry.
func HangLosses(h history.History, losses []Loss) Result {
	type key struct {
		hang    int
		gateway string
	}
	by := map[key][]history.Request{}
	for _, l := range losses {
		if l.Cause == CauseEngineHang {
			k := key{l.Hang, l.Request.Gateway}
			by[k] = append(by[k], l.Request)
		}
	}
	keys := make([]key, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].hang < keys[j].hang || keys[i].hang == keys[j].hang && keys[i].gateway < keys[j].gateway
	})
	var bad examples
	hangs := map[int]bool{}
	one, more := 0, 0
	for _, k := range keys {
		hangs[k.hang] = true
		qs := by[k]
		if len(qs) == 1 {
			one++
			continue
		}
		more++
		sort.Slice(qs, func(i, j int) bool { return qs[i].Complete < qs[j].Complete })
		for _, q := range qs[1:] {
			if q.Invoke >= qs[0].Complete {
				f := h.Engines[k.hang]
				bad.add("%s sent a request at %v into the hang of %s that began at %v, after its own timeout into it came back at %v",
					k.gateway, q.Invoke.Round(time.Millisecond), f.Worker, f.From.Round(time.Millisecond), qs[0].Complete.Round(time.Millisecond))
			}
		}
	}
	total := 0
	for _, f := range h.Engines {
		if f.Kind == nemesis.EngineHang {
			total++
		}
	}
	if bad.n > 0 {
		return Fail("%d requests lost to a hang after their gateway's own timeout into it: %s", bad.n, bad.String())
	}
	return Pass("%d engine hangs, %d of them cost requests: %d times a gateway lost one, %d times more than one, all in flight "+
		"before its own timeout into the hang came back; none was sent after it", total, len(hangs), one, more)
}
