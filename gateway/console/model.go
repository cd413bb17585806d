package console

import "time"

// State is the mesh as one gateway sees it at one moment.
type State struct {
	// Node is this gateway's node id.
	Node    string
	Peers   []Peer
	Workers []Worker
	Journal []Journal
	// Recent are transitions the source already knows with their own times (the health and
	// breaker transitions the owner keeps, gateway/owned); the Hub takes them from its first
	// read only, then derives its own.
	Recent []Transition
}

// Peer is one gateway of the mesh. Comparable, so that a diff is a plain !=.
type Peer struct {
	ID      string `json:"id"`
	Status  string `json:"status"` // alive, suspect, dead, left, foreign
	Raft    string `json:"raft"`   // leader, voter, nonvoter or ""
	Region  string `json:"region,omitempty"`
	Color   string `json:"color,omitempty"`
	Version string `json:"version,omitempty"`
	Applied uint64 `json:"applied_index"`
	Owned   int    `json:"owned"`
	Self    bool   `json:"self,omitempty"`
	// Draining marks a gateway being drained.
	Draining bool `json:"draining,omitempty"`
}

// Worker is one worker with the state this gateway sees. Comparable, so that a diff is a plain
// !=; Models is its models comma-joined.
type Worker struct {
	ID       string `json:"id"`
	URL      string `json:"url"`
	Owner    string `json:"owner"`
	Region   string `json:"region,omitempty"`
	Models   string `json:"models,omitempty"`
	Health   string `json:"health"`
	Breaker  string `json:"breaker"`
	Disabled bool   `json:"disabled,omitempty"`
	// Reason is why it was disabled, while it is.
	Reason   string `json:"reason,omitempty"`
	Dead     bool   `json:"dead,omitempty"`
	Routable bool   `json:"routable"`
	Stale    bool   `json:"stale,omitempty"`
	// Hit is the prefix-cache hit ratio observed at this gateway, -1 before any report.
	Hit    float64 `json:"hit"`
	Active int64   `json:"active"`
}

// Journal is one open weight-update record.
type Journal struct {
	ID          string            `json:"id"`
	Coordinator string            `json:"coordinator"`
	Status      string            `json:"status"`
	StartedAt   time.Time         `json:"started_at"`
	Targets     int               `json:"targets"`
	Outcomes    map[string]string `json:"outcomes,omitempty"`
}

// Transition is one change the console shows with its time.
type Transition struct {
	At time.Time `json:"at"`
	// Kind is routing, failover, handoff, leader, peer, worker, health or breaker.
	Kind string `json:"kind"`
	// Subject is the worker or peer id it is about.
	Subject string `json:"subject"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	// Text says it in a sentence.
	Text string `json:"text"`
}
