package admin

import (
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/worker"
)

// WorkerList is the answer of GET /workers.
type WorkerList struct {
	Workers []Record `json:"workers"`
	Total   int      `json:"total"`
}

// Record is one worker as the admin API shows it (DESIGN.md section 9). It never carries the
// API key: the spec fields are copied from a redacted spec.
type Record struct {
	ID             string             `json:"id"`
	DisplayID      string             `json:"display_id"`
	URL            string             `json:"url"`
	ConnectionMode string             `json:"connection_mode"`
	Provider       string             `json:"provider,omitempty"`
	Owner          string             `json:"owner"`
	Epoch          uint64             `json:"epoch"`
	Origin         string             `json:"origin"`
	HealthState    string             `json:"health_state"`
	Disabled       bool               `json:"disabled"`
	IsDead         bool               `json:"is_dead"`
	Routable       bool               `json:"routable"`
	Stale          bool               `json:"stale"`
	ActiveRequests int64              `json:"active_requests"`
	Models         []string           `json:"models"`
	Capabilities   []string           `json:"capabilities"`
	Priority       int                `json:"priority"`
	Cost           float64            `json:"cost"`
	Labels         map[string]string  `json:"labels,omitempty"`
	Region         string             `json:"region,omitempty"`
	HasAPIKey      bool               `json:"has_api_key"`
	Health         *worker.Health     `json:"health,omitempty"`
	Resilience     *worker.Resilience `json:"resilience,omitempty"`
}

func (h *Handler) record(w *pool.Worker) Record {
	spec := w.Spec() // redacted
	gates := w.Gates()
	owner := w.Owner()
	if owner == "" {
		owner = h.cfg.NodeID
	}
	models := spec.Models
	if models == nil {
		models = []string{}
	}
	return Record{
		ID:             string(w.ID),
		DisplayID:      w.DisplayID,
		URL:            w.URL,
		ConnectionMode: spec.ConnectionMode,
		Provider:       spec.Provider,
		Owner:          owner,
		Origin:         w.Origin,
		HealthState:    w.Health().String(),
		Disabled:       gates&pool.GateDisabled != 0,
		IsDead:         gates&pool.GateDead != 0,
		Routable:       gates == 0,
		ActiveRequests: w.Inflight(),
		Models:         models,
		Capabilities:   w.Caps.Names(),
		Priority:       spec.PriorityOrDefault(),
		Cost:           spec.CostOrDefault(),
		Labels:         spec.Labels,
		Region:         spec.Region,
		HasAPIKey:      w.APIKey() != "",
		Health:         spec.Health,
		Resilience:     spec.Resilience,
	}
}
