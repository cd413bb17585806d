package admin

import (
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/pool"
)

// BreakerUnknown is the breaker state GET /mesh/owners shows for a worker whose breaker state
// this gateway does not know: one another gateway owns before its owner's first bulletin, one
// it owns but has not started running yet, or any on a gateway without a Config.Runtime.
const BreakerUnknown = "unknown"

// Owner is one worker as GET /mesh/owners answers it (DESIGN.md section 9): who owns it, at which
// epoch, and the state this gateway sees. Fields may be added, none renamed. It never carries
// the API key.
type Owner struct {
	// Worker is the worker id.
	Worker string `json:"worker"`
	URL    string `json:"url"`
	// Owner is the node id of the gateway that probes the worker and may remove it; Epoch is
	// the raft index of the last ownership change (the fencing token).
	Owner string `json:"owner"`
	// Region is the worker's region (its spec's, by default its registering gateway's); empty
	// when it has none.
	Region      string `json:"region,omitempty"`
	Epoch       uint64 `json:"epoch"`
	HealthState string `json:"health_state"`
	// Breaker is the circuit breaker's state (closed, open, half_open) as GET /workers shows
	// it (the owner's, from its bulletins, for an imported worker), or BreakerUnknown.
	Breaker  string `json:"breaker"`
	Disabled bool   `json:"disabled"`
	IsDead   bool   `json:"is_dead"`
	// Stale marks state imported from the owner's bulletins that was not refreshed for 3 × the
	// worker's probe interval (DESIGN.md section 4); it keeps its last value meanwhile.
	Stale bool `json:"stale"`
	// Origin is "local" when this gateway owns the worker, "mesh" when another one does.
	Origin string `json:"origin"`
	// Cache is the prefix-cache hit ratio observed at this gateway, as GET /workers shows it.
	Cache *Cache `json:"cache,omitempty"`
}

// OwnerList is the answer of GET /mesh/owners.
type OwnerList struct {
	Owners []Owner `json:"owners"`
}

// meshOwners is GET /mesh/owners: one row per worker record, sorted by worker id, from the same
// sources as GET /workers (the raft records when there are, else the pool, with the runtime
// state of the workers this gateway owns).
func (h *Handler) meshOwners(ctx *fasthttp.RequestCtx) {
	var snap *pool.Snapshot
	if h.cfg.Pool != nil {
		snap = h.cfg.Pool.Snapshot()
	}
	recs := h.records()
	out := OwnerList{Owners: make([]Owner, 0, len(recs))}
	for i := range recs {
		var w *pool.Worker
		if snap != nil {
			w = snap.Get(recs[i].ID)
		}
		r := h.record(&recs[i], w)
		breaker := BreakerUnknown
		if r.Breaker != nil {
			breaker = r.Breaker.State.String()
		}
		out.Owners = append(out.Owners, Owner{
			Worker: r.ID, URL: r.URL, Owner: r.Owner, Region: r.Region, Epoch: r.Epoch, HealthState: r.HealthState,
			Breaker: breaker, Disabled: r.Disabled, IsDead: r.IsDead, Stale: r.Stale, Origin: r.Origin,
			Cache: r.Cache,
		})
	}
	slices.SortStableFunc(out.Owners, func(a, b Owner) int { return strings.Compare(a.Worker, b.Worker) })
	writeJSON(ctx, fasthttp.StatusOK, out)
}
