package admin

import (
	"net/url"
	"strings"
	"time"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/fleet"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// WorkerList is the answer of GET /workers.
type WorkerList struct {
	Workers []Record `json:"workers"`
	Total   int      `json:"total"`
}

// Record is one worker as the admin API shows it (DESIGN.md section 9): the durable raft record
// and this gateway's runtime state of it. It never carries the API key: the spec fields are
// copied one by one, and HasAPIKey only says whether there is one.
type Record struct {
	ID string `json:"id"`
	// WorkerID is what the SGLang-Omni router calls a worker: the form the admin routes take
	// after /workers/, its URL percent-encoded (http%3A%2F%2F127.0.0.1%3A8013), or, for a
	// data-parallel rank, whose URL its siblings share, its id.
	WorkerID       string `json:"worker_id"`
	DisplayID      string `json:"display_id"`
	URL            string `json:"url"`
	ConnectionMode string `json:"connection_mode"`
	Provider       string `json:"provider,omitempty"`
	Owner          string `json:"owner"`
	Epoch          uint64 `json:"epoch"`
	// Origin is "local" when this gateway owns the worker, "mesh" when another one does.
	Origin string `json:"origin"`
	// HealthState is the worker's health as its owner judges it, or "draining" while its
	// record is: a DELETE was accepted, and its owner removes it at DrainDeadline.
	HealthState   string     `json:"health_state"`
	DrainDeadline *time.Time `json:"drain_deadline,omitempty"`
	Disabled      bool       `json:"disabled"`
	// DisabledReason, DisabledBy and DisabledAt say why, who and when, while disabled.
	DisabledReason string     `json:"disabled_reason,omitempty"`
	DisabledBy     string     `json:"disabled_by,omitempty"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	IsDead         bool       `json:"is_dead"`
	Routable       bool       `json:"routable"`
	Stale          bool       `json:"stale"`
	ActiveRequests int64      `json:"active_requests"`
	// RegisteredAt is when the worker was registered; Revision is the raft index of the
	// record's last change.
	RegisteredAt *time.Time         `json:"registered_at,omitempty"`
	Revision     uint64             `json:"revision"`
	Models       []string           `json:"models"`
	Capabilities []string           `json:"capabilities"`
	Priority     int                `json:"priority"`
	Cost         float64            `json:"cost"`
	Labels       map[string]string  `json:"labels,omitempty"`
	Region       string             `json:"region,omitempty"`
	DPRank       *int               `json:"dp_rank,omitempty"`
	HasAPIKey    bool               `json:"has_api_key"`
	Health       *worker.Health     `json:"health,omitempty"`
	Resilience   *worker.Resilience `json:"resilience,omitempty"`

	// The runtime state of a worker this gateway owns (Config.Runtime): its health probes (the
	// last error and status describe the last probe if it failed) and its circuit breaker.
	ConsecutiveFailures  int               `json:"consecutive_failures"`
	ConsecutiveSuccesses int               `json:"consecutive_successes"`
	LastError            string            `json:"last_error"`
	LastStatusCode       int               `json:"last_status_code"`
	LastHealthCheck      *time.Time        `json:"last_health_check,omitempty"`
	Breaker              *breaker.Snapshot `json:"breaker,omitempty"`
	// Transitions are the recent health and breaker transitions of a worker this gateway owns
	// (oldest first); only the owner has them.
	Transitions []owned.Transition `json:"transitions,omitempty"`
	// DiscoveredModels are the models the worker said it serves when its owner asked; GET
	// /v1/models lists them while it declares none. Omitted when nothing was discovered.
	DiscoveredModels []string `json:"discovered_models,omitempty"`
	// Cache is what the worker's answers through this gateway said of its prefix cache;
	// omitted while the gateway's pool does not hold the worker.
	Cache *Cache `json:"cache,omitempty"`

	// FleetAck is set in the answer of a write: the live peers whose data plane applied it
	// within --fleet-ack-timeout-secs, and those that lagged.
	FleetAck *fleetack.Report `json:"fleet_ack,omitempty"`
}

// Cache is the prefix-cache hit ratio observed at this gateway: the prompt tokens of the
// worker's answers that reported their cached part (OpenAI's
// usage.prompt_tokens_details.cached_tokens, SGLang's meta_info.cached_tokens), and of them the
// cached ones; beside it, what this gateway's cache_aware index predicted: the routing text its
// picks sent the worker, and the part the index believed the worker held. Other gateways'
// traffic to the worker is not in it.
type Cache struct {
	PromptTokens uint64 `json:"prompt_tokens"`
	CachedTokens uint64 `json:"cached_tokens"`
	// HitRatio is CachedTokens / PromptTokens, null before any prompt token was reported.
	HitRatio *float64 `json:"hit_ratio"`
	// RoutedTextBytes and PredictedCachedBytes are the prediction's counts, in bytes of routing
	// text (the engines count tokens: compare the ratios).
	RoutedTextBytes      uint64 `json:"routed_text_bytes"`
	PredictedCachedBytes uint64 `json:"predicted_cached_bytes"`
	// PredictedHitRatio is PredictedCachedBytes / RoutedTextBytes, null before any pick (or
	// under a policy other than cache_aware).
	PredictedHitRatio *float64 `json:"predicted_hit_ratio"`
}

// cacheOf is w's Cache.
func cacheOf(w *pool.Worker) *Cache {
	prompt, cached := w.CacheTokens()
	text, matched := w.Prediction()
	c := &Cache{PromptTokens: prompt, CachedTokens: cached, RoutedTextBytes: text, PredictedCachedBytes: matched}
	if prompt > 0 {
		r := float64(cached) / float64(prompt)
		c.HitRatio = &r
	}
	if text > 0 {
		r := float64(matched) / float64(text)
		c.PredictedHitRatio = &r
	}
	return c
}

// Runtime supplies the runtime state of the workers this gateway owns; gateway/owned.Manager
// implements it. ok is false for a worker it does not own.
type Runtime interface {
	Status(id worker.ID) (st owned.Status, ok bool)
}

// Imports supplies the runtime state imported from the bulletins of the workers' owners;
// gateway/fleet.Importer implements it. ok is false before a worker's first bulletin.
type Imports interface {
	Imported(id worker.ID) (st fleet.ImportedStatus, ok bool)
}

// HealthUnknown is the health state shown for a worker owned elsewhere before its owner's
// first bulletin arrived.
const HealthUnknown = "unknown"

// record renders rec with the runtime state of w, this gateway's pool worker (nil while the
// pool has not caught up with the record).
func (h *Handler) record(rec *fsm.Record, w *pool.Worker) Record {
	spec := rec.Spec.Redacted()
	models := spec.ModelList()
	if models == nil {
		models = []string{}
	}
	origin := pool.OriginMesh
	if rec.Owner == h.cfg.NodeID {
		origin = pool.OriginLocal
	}
	r := Record{
		ID:             string(rec.ID),
		WorkerID:       omniWorkerID(rec),
		DisplayID:      spec.DisplayID(),
		URL:            spec.URL,
		ConnectionMode: spec.ConnectionMode,
		Provider:       spec.Provider,
		Owner:          rec.Owner,
		Epoch:          rec.Epoch,
		Origin:         origin,
		HealthState:    health.Pending.String(),
		Disabled:       rec.Disabled,
		DisabledReason: rec.DisabledReason,
		DisabledBy:     rec.DisabledBy,
		DisabledAt:     timePtr(rec.DisabledAt),
		IsDead:         rec.IsDead,
		RegisteredAt:   timePtr(rec.RegisteredAt),
		Revision:       rec.Revision,
		Models:         models,
		Capabilities:   spec.Caps().Names(),
		Priority:       spec.PriorityOrDefault(),
		Cost:           spec.CostOrDefault(),
		Labels:         spec.Labels,
		Region:         spec.Region,
		DPRank:         spec.DPRank,
		HasAPIKey:      rec.Spec.HasAPIKey(),
		Health:         spec.Health,
		Resilience:     spec.Resilience,
	}
	if w != nil {
		r.HealthState = w.Health().String()
		r.Routable = w.Gates() == 0 && w.Allow() && !rec.Disabled && !rec.IsDead
		r.ActiveRequests = w.Inflight()
		r.HasAPIKey = r.HasAPIKey || w.APIKey() != ""
		r.DiscoveredModels = w.DiscoveredModels()
		r.Cache = cacheOf(w)
	}
	if origin == pool.OriginLocal && h.cfg.Runtime != nil {
		if st, ok := h.cfg.Runtime.Status(rec.ID); ok {
			r.ConsecutiveFailures, r.ConsecutiveSuccesses = st.ConsecutiveFailures, st.ConsecutiveSuccesses
			r.LastError, r.LastStatusCode = st.LastError, st.LastStatusCode
			r.LastHealthCheck = timePtr(st.LastProbe)
			r.Breaker = &st.Breaker
			r.Transitions = st.Transitions
		}
	}
	if origin == pool.OriginMesh {
		h.imported(&r, rec.ID)
	}
	if rec.Draining {
		// Before the owner's health follows (a bulletin on its way, a restart), the record says.
		r.HealthState, r.DrainDeadline = health.Draining.String(), timePtr(rec.DrainDeadline())
		r.Routable = false // nor is it routable, even before this gateway's pool applied the record
	}
	return r
}

// imported fills r from the last bulletin of the worker's owner, or marks its health unknown
// before the first one.
func (h *Handler) imported(r *Record, id worker.ID) {
	st, ok := h.importedStatus(id)
	if !ok {
		r.HealthState = HealthUnknown
		return
	}
	b := &st.Bulletin
	if !b.HealthUnknown {
		r.HealthState = b.Health.String()
	}
	r.Stale = st.Stale
	r.ConsecutiveFailures, r.ConsecutiveSuccesses = b.HealthFailures, b.HealthSuccesses
	r.LastError, r.LastStatusCode = b.LastError, b.LastStatusCode
	r.LastHealthCheck = timePtr(b.LastProbe)
	if !b.BreakerUnknown {
		snap := breaker.Snapshot{State: b.Breaker, ConsecutiveFailures: b.BreakerFailures, ConsecutiveSuccesses: b.BreakerSuccesses}
		if b.Breaker == breaker.Open {
			snap.ReopensAt = st.Received.Add(b.BreakerReopenIn).UTC()
		}
		r.Breaker = &snap
	}
}

// importedStatus is the last bulletin of the worker's owner as this gateway's importer holds
// it; false before the first one, or on a gateway without imports.
func (h *Handler) importedStatus(id worker.ID) (fleet.ImportedStatus, bool) {
	if h.cfg.Imports == nil {
		return fleet.ImportedStatus{}, false
	}
	return h.cfg.Imports.Imported(id)
}

// omniWorkerID is Record.WorkerID of rec.
func omniWorkerID(rec *fsm.Record) string {
	if rec.Spec.DPRank != nil {
		return string(rec.ID)
	}
	return strings.ReplaceAll(url.QueryEscape(rec.Spec.URL), "+", "%20")
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
