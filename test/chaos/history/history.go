// Package history records what a chaos run did and saw: admin operations with their invocation
// and response times and outcomes, client requests and the worker that served each, ownership
// samples, when each node was down and when each engine was under a fault; the checkers in
// test/chaos/check read it.
package history

import (
	"sync"
	"time"
)

// Outcome is what a client knows of an operation once it returned.
type Outcome string

// The outcomes of an operation. Unknown means it may or may not have taken effect: a timeout,
// a connection lost after the request was sent, or a 503 outcome_unknown.
const (
	OK      Outcome = "ok"
	Failed  Outcome = "failed"
	Unknown Outcome = "unknown"
)

// Kind names an admin operation.
type Kind string

// The admin operations of the workload.
const (
	Register     Kind = "register"
	Disable      Kind = "disable"
	Enable       Kind = "enable"
	Read         Kind = "read"
	WeightUpdate Kind = "weight_update"
	// Transfer moves a worker's ownership (POST /workers/{id}/transfer); no model reads it, the
	// ownership samples do.
	Transfer Kind = "transfer"
	// Delete drains a worker, then its owner removes the record (DELETE /workers/{id}: 202,
	// the record enters draining; 200, it is gone at once).
	Delete Kind = "delete"
	// Rebalance evens out ownership (POST /mesh/rebalance); it names no worker. Like transfers,
	// the ownership samples read it.
	Rebalance Kind = "rebalance"
)

// Never is the response time of an operation whose outcome is unknown: it may take effect at
// any time after its invocation.
const Never = time.Duration(1<<63 - 1)

// AdminOp is one admin operation, with times measured from the start of the run.
type AdminOp struct {
	Client   int           `json:"client"`
	Kind     Kind          `json:"kind"`
	Worker   string        `json:"worker"` // the worker id (w-...)
	Gateway  string        `json:"gateway"`
	Invoke   time.Duration `json:"invoke"`
	Complete time.Duration `json:"complete"` // Never when Outcome is Unknown
	Outcome  Outcome       `json:"outcome"`
	Status   int           `json:"status"`
	Code     string        `json:"code,omitempty"`
	// Found, Disabled and Draining are what a read saw (Found false: 404; Draining: the record
	// had a drain_deadline).
	Found    bool `json:"found,omitempty"`
	Disabled bool `json:"disabled,omitempty"`
	Draining bool `json:"draining,omitempty"`
	// Moved is how many workers a rebalance moved.
	Moved int `json:"moved,omitempty"`
	// Acked and Lagging are the write's fleet_ack: the gateways that applied it before the
	// answer, and those live but late. A gateway in neither was not live in the writer's mesh
	// (dead, suspect, cut off) and was not waited for. Acked is nil when the answer had no
	// fleet_ack.
	Acked   []string `json:"acked,omitempty"`
	Lagging []string `json:"lagging,omitempty"`
}

// Request is one client request to the data plane.
type Request struct {
	Gateway  string        `json:"gateway"`
	Stream   bool          `json:"stream"`
	Invoke   time.Duration `json:"invoke"`
	Complete time.Duration `json:"complete"`
	Status   int           `json:"status"`
	Worker   string        `json:"worker,omitempty"` // X-Mesh-Worker of the answer
	Class    Class         `json:"class"`
}

// Class sorts a client request's result.
type Class string

// The classes of client requests. NoWorker is a 503 no_available_workers: the gateway had no
// routable worker. Drained is a 503 draining: the gateway was drained and had left the mesh, and
// sent the client elsewhere (docs/errors.md). GatewayLost is every other failure: no answer, a
// 5xx of the gateway's own, a stream cut or ended by an error event.
const (
	Served      Class = "ok"
	NoWorker    Class = "failed_no_worker"
	Drained     Class = "refused_drained"
	GatewayLost Class = "failed_gateway"
)

// OwnerRow is one row of a GET /mesh/owners answer.
type OwnerRow struct {
	Worker string `json:"worker"`
	Owner  string `json:"owner"`
	Epoch  uint64 `json:"epoch"`
}

// OwnerSample is one gateway's GET /mesh/owners at a moment.
type OwnerSample struct {
	At      time.Duration `json:"at"`
	Gateway string        `json:"gateway"`
	Rows    []OwnerRow    `json:"rows"`
}

// ProbeSample is one engine's probe counts by gateway (GET /_stats) at a moment.
type ProbeSample struct {
	At     time.Duration    `json:"at"`
	Worker string           `json:"worker"`
	Probes map[string]int64 `json:"probes"`
}

// Down is an interval in which a node could not serve or was cut from the majority: killed,
// stopped, or isolated by a partition. To is Never while it lasts.
type Down struct {
	Node   string        `json:"node"`
	From   time.Duration `json:"from"`
	To     time.Duration `json:"to"`
	Reason string        `json:"reason"`
	// Serving is true when the node's process ran (a partition): its data plane still answers.
	Serving bool `json:"serving"`
}

// EngineFault is an interval in which an engine was under a fault that reaches model requests
// (engine-hang, engine-flap): From is taken before the fault was set, To once it was cleared, so
// the interval covers the fault.
type EngineFault struct {
	Worker string        `json:"worker"` // the engine's worker id
	Kind   string        `json:"kind"`
	From   time.Duration `json:"from"`
	To     time.Duration `json:"to"`
}

// RegionCut is an interval in which a region of a simulated WAN was cut off from the others
// (the nemesis's partition-one over regions): its gateways, and the worker ids of its engines.
type RegionCut struct {
	Region   string        `json:"region"`
	Gateways []string      `json:"gateways"`
	Workers  []string      `json:"workers"`
	From     time.Duration `json:"from"`
	To       time.Duration `json:"to"` // Never while it lasts
}

// Final is one worker as one gateway lists it after the faults healed.
type Final struct {
	Found    bool `json:"found"`
	Disabled bool `json:"disabled"`
	Draining bool `json:"draining,omitempty"`
}

// History is everything a run recorded.
type History struct {
	Admin    []AdminOp                   `json:"admin"`
	Requests []Request                   `json:"requests"`
	Owners   []OwnerSample               `json:"owners"`
	Probes   []ProbeSample               `json:"probes"`
	Down     []Down                      `json:"down"`
	Engines  []EngineFault               `json:"engine_faults,omitempty"`
	Cuts     []RegionCut                 `json:"region_cuts,omitempty"`
	Final    map[string]map[string]Final `json:"final"` // gateway → worker → what it lists
	Weights  map[string]bool             `json:"weight_workers"`
	End      time.Duration               `json:"end"`
}

// Recorder collects a History from many goroutines. Its clock starts at New.
type Recorder struct {
	start time.Time

	mu sync.Mutex
	h  History
}

// NewRecorder returns a Recorder whose times count from now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now(), h: History{Final: map[string]map[string]Final{}, Weights: map[string]bool{}}}
}

// Now is the time since the recorder started.
func (r *Recorder) Now() time.Duration { return time.Since(r.start) }

// Admin records an admin operation.
func (r *Recorder) Admin(op AdminOp) {
	r.mu.Lock()
	r.h.Admin = append(r.h.Admin, op)
	r.mu.Unlock()
}

// Request records a client request.
func (r *Recorder) Request(q Request) {
	r.mu.Lock()
	r.h.Requests = append(r.h.Requests, q)
	r.mu.Unlock()
}

// Owners records an ownership sample.
func (r *Recorder) Owners(s OwnerSample) {
	r.mu.Lock()
	r.h.Owners = append(r.h.Owners, s)
	r.mu.Unlock()
}

// Probes records a probe-count sample.
func (r *Recorder) Probes(s ProbeSample) {
	r.mu.Lock()
	r.h.Probes = append(r.h.Probes, s)
	r.mu.Unlock()
}

// DownFrom records that node went down now for reason; serving says whether its process still
// answers. DownUntil ends it.
func (r *Recorder) DownFrom(node, reason string, serving bool) {
	r.mu.Lock()
	r.h.Down = append(r.h.Down, Down{Node: node, From: r.Now(), To: Never, Reason: reason, Serving: serving})
	r.mu.Unlock()
}

// DownUntil ends node's open down intervals of reason now.
func (r *Recorder) DownUntil(node, reason string) {
	now := r.Now()
	r.mu.Lock()
	for i := range r.h.Down {
		if d := &r.h.Down[i]; d.Node == node && d.Reason == reason && d.To == Never {
			d.To = now
		}
	}
	r.mu.Unlock()
}

// IsDown reports whether node is in an open down interval whose process does not serve.
func (r *Recorder) IsDown(node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.h.Down {
		if d.Node == node && d.To == Never && !d.Serving {
			return true
		}
	}
	return false
}

// EngineFault records that worker's engine was under a fault of kind from from to now.
func (r *Recorder) EngineFault(worker, kind string, from time.Duration) {
	to := r.Now()
	r.mu.Lock()
	r.h.Engines = append(r.h.Engines, EngineFault{Worker: worker, Kind: kind, From: from, To: to})
	r.mu.Unlock()
}

// CutFrom records that region, with its gateways and its engines' workers, was cut off now;
// CutUntil ends it.
func (r *Recorder) CutFrom(region string, gateways, workers []string) {
	r.mu.Lock()
	r.h.Cuts = append(r.h.Cuts, RegionCut{Region: region, Gateways: gateways, Workers: workers, From: r.Now(), To: Never})
	r.mu.Unlock()
}

// CutUntil ends region's open cut now.
func (r *Recorder) CutUntil(region string) {
	now := r.Now()
	r.mu.Lock()
	for i := range r.h.Cuts {
		if c := &r.h.Cuts[i]; c.Region == region && c.To == Never {
			c.To = now
		}
	}
	r.mu.Unlock()
}

// Final records what gateway lists for worker after the faults healed.
func (r *Recorder) Final(gateway, worker string, f Final) {
	r.mu.Lock()
	if r.h.Final[gateway] == nil {
		r.h.Final[gateway] = map[string]Final{}
	}
	r.h.Final[gateway][worker] = f
	r.mu.Unlock()
}

// WeightWorker marks worker as a target of weight updates (its flags change inside an update,
// so the linearizability model leaves it out).
func (r *Recorder) WeightWorker(worker string) {
	r.mu.Lock()
	r.h.Weights[worker] = true
	r.mu.Unlock()
}

// Snapshot returns a copy of the history so far, its End set to now.
func (r *Recorder) Snapshot() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	h.Admin = append([]AdminOp(nil), r.h.Admin...)
	h.Requests = append([]Request(nil), r.h.Requests...)
	h.Owners = append([]OwnerSample(nil), r.h.Owners...)
	h.Probes = append([]ProbeSample(nil), r.h.Probes...)
	h.Down = append([]Down(nil), r.h.Down...)
	h.Engines = append([]EngineFault(nil), r.h.Engines...)
	h.Cuts = append([]RegionCut(nil), r.h.Cuts...)
	h.Final = map[string]map[string]Final{}
	for g, m := range r.h.Final {
		h.Final[g] = map[string]Final{}
		for w, f := range m {
			h.Final[g][w] = f
		}
	}
	h.Weights = map[string]bool{}
	for w := range r.h.Weights {
		h.Weights[w] = true
	}
	h.End = time.Since(r.start)
	return h
}

// Counts returns the number of admin operations and client requests so far, for progress lines.
func (r *Recorder) Counts() (admin int, requests map[Class]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	requests = map[Class]int{}
	for _, q := range r.h.Requests {
		requests[q.Class]++
	}
	return len(r.h.Admin), requests
}

// Duration turns a checker's int64 time back into a Duration, for messages.
func Duration(ns int64) time.Duration { return time.Duration(ns).Round(time.Millisecond) }
