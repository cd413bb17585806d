package fsm

import (
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// Record is the durable record of one worker, the same on every gateway (DESIGN.md section 2).
// The Spec holds the worker's api_key: a Record must never be logged or returned as it is (its
// LogValue leaves the spec out; use Spec.Redacted for answers).
type Record struct {
	ID   worker.ID
	Spec worker.Spec
	// Owner is the node id of the gateway that probes the worker, runs its breaker and may
	// remove it.
	Owner string
	// Epoch is the raft index of the last ownership change: the fencing token that goes with
	// Owner.
	Epoch uint64
	// Disabled is the operator's switch; DisabledReason, DisabledBy and DisabledAt say why, who
	// and when, and are empty while not disabled.
	Disabled       bool
	DisabledReason string
	DisabledBy     string
	DisabledAt     time.Time
	// IsDead is the operator's manual quarantine.
	IsDead       bool
	RegisteredAt time.Time
	// Revision is the raft index of the last change of the record; PATCH compares and sets it.
	Revision uint64
	// Draining is set by a DELETE of a ready worker (the Drain command): no gateway starts a new
	// request to the worker, and its owner removes the record, fenced by (Owner, Epoch), once
	// DrainSettle has passed since DrainStartedAt (DrainDeadline). It is never cleared: the
	// record only leaves the state by its removal.
	Draining       bool
	DrainStartedAt time.Time
	DrainSettle    time.Duration
}

// DrainDeadline is when the owner of a draining worker removes its record: DrainStartedAt plus
// DrainSettle, on the clock of the gateway that took the DELETE. Zero when not draining.
func (r *Record) DrainDeadline() time.Time {
	if !r.Draining {
		return time.Time{}
	}
	return r.DrainStartedAt.Add(r.DrainSettle)
}

// Clone returns a deep copy of r.
func (r *Record) Clone() Record {
	c := *r
	c.Spec = r.Spec.Clone()
	return c
}

// LogValue keeps the spec, and so the api_key, out of log lines.
func (r Record) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("id", string(r.ID)),
		slog.String("url", r.Spec.URL),
		slog.String("owner", r.Owner),
		slog.Uint64("epoch", r.Epoch),
		slog.Uint64("revision", r.Revision),
		slog.Bool("disabled", r.Disabled),
		slog.Bool("is_dead", r.IsDead),
		slog.Bool("draining", r.Draining),
	)
}

// JournalRecord is one open weight update (DESIGN.md section 9, journal.go).
type JournalRecord struct {
	ID          string
	Targets     []worker.ID
	Outcomes    map[worker.ID]string
	Coordinator string
	StartedAt   time.Time
	// PriorDisabled are the targets that were disabled already when the update opened.
	PriorDisabled []worker.ID
	// Status is JournalRunning, JournalInterrupted or JournalCoordinatorLost, as raft stored
	// it; State is what gateways show.
	Status string
}

// State is the record's status as gateways show and act on it: Status, except that a running
// record whose every target has an outcome, one of them not updated, is JournalFailed: its
// update ended (the record stays open for an operator), whether or not its coordinator still
// runs. It is derived from the replicated record, so every gateway, of any version that
// replicates the record, agrees on it.
func (j *JournalRecord) State() string {
	if j.Status != JournalRunning || len(j.Targets) == 0 {
		return j.Status
	}
	failed := false
	for _, id := range j.Targets {
		switch j.Outcomes[id] {
		case OutcomePending, "":
			return j.Status
		case OutcomeFailed, OutcomeUnknown:
			failed = true
		}
	}
	if failed {
		return JournalFailed
	}
	return j.Status
}

// Clone returns a deep copy of j.
func (j *JournalRecord) Clone() JournalRecord {
	c := *j
	c.Targets = slices.Clone(j.Targets)
	c.Outcomes = maps.Clone(j.Outcomes)
	c.PriorDisabled = slices.Clone(j.PriorDisabled)
	return c
}
