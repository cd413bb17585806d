package pool

import (
	"net/url"
	"slices"
	"strings"

	"github.com/meshgw/meshgw/worker"
)

// Snapshot is an immutable view of the pool at one version. Routable holds the workers whose
// gates were all open when it was built, sorted by id; per-request checks (capability, model,
// breaker) happen in Candidates.
type Snapshot struct {
	Version  uint64
	All      []*Worker // every worker, sorted by id
	Routable []*Worker // workers with every gate open, sorted by id
	// External are the external providers' workers (connection_mode external) whatever their
	// gates, sorted by id: the targets a route fails open to (FailOpen).
	External []*Worker
	pool     *Pool
}

// Get returns the worker with id, or nil. It asks the pool (Pool.Get): a snapshot keeps no index
// of its own, which would cost a copy of every worker at each registration, so a worker added or
// removed after the snapshot was taken is found, or not, as the pool has it now.
func (s *Snapshot) Get(id worker.ID) *Worker {
	if s.pool == nil {
		return nil
	}
	return s.pool.Get(id)
}

// Lookup finds a worker by id or by URL (percent-encoded or not, canonicalized first), as the
// admin routes accept either.
func (s *Snapshot) Lookup(ref string) *Worker {
	if w := s.Get(worker.ID(ref)); w != nil {
		return w
	}
	if dec, err := url.PathUnescape(ref); err == nil {
		ref = dec
	}
	if w := s.Get(worker.ID(ref)); w != nil {
		return w
	}
	if !strings.Contains(ref, "://") {
		return nil
	}
	for _, allowPath := range []bool{false, true} {
		canon, err := worker.CanonicalURL(ref, allowPath)
		if err != nil {
			continue
		}
		for _, w := range s.All {
			if w.URL == canon {
				return w
			}
		}
	}
	return nil
}

// Candidates appends to dst the routable workers that have every capability in need, serve model
// and whose breaker allows traffic. avoid (may be nil) is left out when another candidate exists:
// a retry prefers a different worker than the one that just failed. It does not allocate when
// dst has room.
func (s *Snapshot) Candidates(dst []*Worker, need worker.Capability, model []byte, avoid *Worker) []*Worker {
	dst = dst[:0]
	avoided := false
	for _, w := range s.Routable {
		if !w.Caps.Has(need) || !w.ServesModel(model) || w.Gates() != 0 || !w.Allow() {
			continue
		}
		if w == avoid {
			avoided = true
			continue
		}
		dst = append(dst, w)
	}
	if len(dst) == 0 && avoided {
		dst = append(dst, avoid)
	}
	return dst
}

// RoutableCount is the number of routable workers as DESIGN.md section 2 defines them: every
// gate open and the breaker allowing traffic. /status, /readiness and GET /workers agree with
// the data plane on it (Routable itself leaves breakers to each request).
func (s *Snapshot) RoutableCount() int {
	n := 0
	for _, w := range s.Routable {
		if w.Allow() {
			n++
		}
	}
	return n
}

// OperatorGates are the gates an operator or a removal closes: disabled, is_dead, draining.
// Failing open never crosses them.
const OperatorGates = GateDisabled | GateDead | GateDraining | GateRemoving

// FailOpen appends to dst the external workers that have every capability in need and serve
// model, whatever their health and breaker, but none closed by an operator (OperatorGates):
// where a route of external providers has no routable target, the gateway forwards to one of
// them anyway (Rolter's fail-open, DESIGN.md section 2). avoid is treated as in Candidates. Call
// it only when Candidates found nothing.
func (s *Snapshot) FailOpen(dst []*Worker, need worker.Capability, model []byte, avoid *Worker) []*Worker {
	dst = dst[:0]
	avoided := false
	for _, w := range s.External {
		if !w.Caps.Has(need) || !w.ServesModel(model) || w.Gates()&OperatorGates != 0 {
			continue
		}
		if w == avoid {
			avoided = true
			continue
		}
		dst = append(dst, w)
	}
	if len(dst) == 0 && avoided {
		dst = append(dst, avoid)
	}
	return dst
}

// ExternalRoute reports whether a request for need and model has an external provider among its
// targets, whatever their state: its 503 then says service_unavailable, as SMG's answers for
// external routes do, where an engine pool says no_available_workers.
func (s *Snapshot) ExternalRoute(need worker.Capability, model []byte) bool {
	for _, w := range s.External {
		if w.Caps.Has(need) && w.ServesModel(model) {
			return true
		}
	}
	return false
}

// Why explains in one phrase why no routable worker matches need and model, for the message of a
// 503 no_available_workers.
func (s *Snapshot) Why(need worker.Capability, model []byte) string {
	if len(s.All) == 0 {
		return "no workers are registered"
	}
	if len(s.Routable) == 0 {
		return "no worker is routable (all are unhealthy, disabled, draining, or held after a request got no answer in time)"
	}
	capable, serving := false, false
	for _, w := range s.Routable {
		if w.ServesModel(model) {
			serving = true
			if w.Caps.Has(need) {
				capable = true
			}
		}
	}
	switch {
	case !serving:
		return "no routable worker serves model \"" + string(model) + "\""
	case !capable:
		if len(model) == 0 {
			return "no routable worker has capabilities " + need.String()
		}
		return "no routable worker serving model \"" + string(model) + "\" has capabilities " + need.String()
	}
	return "every matching worker has an open circuit breaker"
}

// Differ tells what routing cannot guess among the workers that have need, all of them
// whatever their state (so the answer does not change with health): whether they serve
// different models (when models is set), and which capabilities of unsure those that serve
// model (empty: any) do not all have. A request whose model or capabilities could not be read
// must name them where the workers differ. It reads every such worker once, and stops early
// when everything asked about differs.
func (s *Snapshot) Differ(need worker.Capability, model []byte, models bool, unsure worker.Capability) (modelsDiffer bool, capsDiffer worker.Capability) {
	var first []string
	seen := false
	all, some := worker.CapAll, worker.Capability(0)
	for _, w := range s.All {
		if !w.Caps.Has(need) {
			continue
		}
		if models && !modelsDiffer {
			if !seen {
				first, seen = w.Models, true
			} else if !sameModels(first, w.Models) {
				modelsDiffer = true
			}
		}
		if unsure != 0 && w.ServesModel(model) {
			all &= w.Caps
			some |= w.Caps
		}
		capsDiffer = (some &^ all) & unsure
		if (!models || modelsDiffer) && capsDiffer == unsure {
			break
		}
	}
	return modelsDiffer, capsDiffer
}

// sameModels reports whether a and b (lists without duplicates) hold the same models.
func sameModels(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, m := range a {
		if !slices.Contains(b, m) {
			return false
		}
	}
	return true
}
