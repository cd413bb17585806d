package weights

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

// Defaults of Config.
const (
	DefaultConcurrency   = 8
	DefaultTargetTimeout = 10 * time.Minute
	// resolveBound bounds each journal write after the update was sent: long enough to outlast
	// an election.
	resolveBound = 30 * time.Second
)

// Writer proposes a raft command; *gateway/fleet.Writer implements it.
type Writer interface {
	Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error)
}

// Fleet waits for every live gateway to apply a write; *fleetack.FleetAck implements it.
type Fleet interface {
	Acknowledge(ctx context.Context, index uint64) fleetack.Report
}

// Records is the applied raft state the coordinator reads; *consensus.Node implements it.
type Records interface {
	Workers() []fsm.Record
	Journal() []fsm.JournalRecord
}

// Sender sends an update's body to one engine and says what became of it.
type Sender interface {
	Send(ctx context.Context, spec worker.Spec, body []byte) Sent
}

// Sent is one engine's answer to an update.
type Sent struct {
	// Outcome is fsm.OutcomeUpdated, fsm.OutcomeFailed or fsm.OutcomeUnknown.
	Outcome string
	// Status is the engine's HTTP status, 0 when it did not answer.
	Status int
	// Message is the engine's message, or why it did not answer.
	Message string
}

// Config configures a Coordinator.
type Config struct {
	// NodeID is this gateway: the coordinator its records name.
	NodeID  string
	Writer  Writer
	Records Records
	// Fleet makes the opening write fleet-acknowledged; nil: the update starts once the leader
	// applied it (a gateway without fleet acknowledgements).
	Fleet Fleet
	Send  Sender
	// Concurrency is how many targets are updated at once; zero means DefaultConcurrency.
	Concurrency int
	// TargetTimeout bounds one target's update; zero means DefaultTargetTimeout.
	TargetTimeout time.Duration
	// Metrics counts updates by result; nil counts nothing.
	Metrics *Metrics
	// Logger receives a line per update and per target; nil means slog.Default().
	Logger *slog.Logger
	// Now stamps the records; nil means time.Now.
	Now func() time.Time
}

// Coordinator runs weight updates from this gateway. Its methods are safe for concurrent use.
type Coordinator struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	running map[string]bool // the records this process is running
}

// New returns a Coordinator.
func New(cfg Config) *Coordinator {
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.TargetTimeout = cmp.Or(cfg.TargetTimeout, DefaultTargetTimeout)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Coordinator{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()).With("component", "weights"),
		running: make(map[string]bool)}
}

// Target says which workers an update goes to; the zero value means every enabled HTTP engine
// worker.
type Target struct {
	Model string
	IDs   []worker.ID
}

// TargetReport is one target's outcome, as the answer lists it.
type TargetReport struct {
	ID      worker.ID `json:"id"`
	URL     string    `json:"url"`
	Outcome string    `json:"outcome"`
	Status  int       `json:"status,omitempty"`
	Message string    `json:"message,omitempty"`
}

// Report is what an update did.
type Report struct {
	// Success is true when every target was updated and the record closed.
	Success bool `json:"success"`
	// ID is the journal record's id.
	ID string `json:"id"`
	// Result is "ok", "failed" (the record stays open), "not_started" (nothing was sent and the
	// record closed), ResultUnresolved or ResultOutcomeUnknown (nothing was sent, and closing
	// the record failed or may have).
	Result  string         `json:"result"`
	Message string         `json:"message"`
	Targets []TargetReport `json:"targets"`
	// FleetAck is the acknowledgement of the write that opened the record.
	FleetAck *fleetack.Report `json:"fleet_ack,omitempty"`
}

// InputError is an update the coordinator refuses before writing anything: no target, or a
// target that is not an HTTP engine worker.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

// Update runs one weight update of body on the targets t picks, and reports each target's
// outcome. An error means nothing was sent: an *fsm.ConflictError naming the record that is
// still open (checked first, before the targets), an *InputError, or a raft error.
func (c *Coordinator) Update(ctx context.Context, body []byte, t Target) (Report, error) {
	// An open record comes first: its disabled targets would otherwise read as "no target".
	if open := c.cfg.Records.Journal(); len(open) > 0 {
		c.cfg.Metrics.count("conflict")
		return Report{}, &fsm.ConflictError{Reason: "weight update " + open[0].ID + " is unresolved"}
	}
	targets, err := c.pick(t)
	if err != nil {
		c.cfg.Metrics.count("rejected")
		return Report{}, err
	}
	id, err := newID()
	if err != nil {
		return Report{}, err
	}
	ids := make([]worker.ID, len(targets))
	for i, r := range targets {
		ids[i] = r.ID
	}
	c.setRunning(id, true)
	defer c.setRunning(id, false)
	res, err := c.cfg.Writer.Apply(ctx, fsm.JournalOpen{ID: id, Coordinator: c.cfg.NodeID, Targets: ids, At: c.cfg.Now()})
	if err == nil && res.Err != nil {
		err = res.Err
	}
	if err != nil {
		result := "error"
		if errors.Is(err, fsm.ErrConflict) {
			result = "conflict"
		}
		c.cfg.Metrics.count(result)
		return Report{}, err
	}
	rep := Report{ID: id, Targets: make([]TargetReport, len(targets))}
	for i, r := range targets {
		rep.Targets[i] = TargetReport{ID: r.ID, URL: r.Spec.URL, Outcome: fsm.OutcomePending}
	}
	if c.cfg.Fleet != nil {
		ack := c.cfg.Fleet.Acknowledge(ctx, res.Index)
		rep.FleetAck = &ack
		if len(ack.Lagging) > 0 {
			return c.notStarted(ctx, rep, ack.Lagging), nil
		}
	}
	c.log.Info("weight update started", "id", id, "targets", len(targets))
	last := c.send(ctx, id, body, targets, rep.Targets)
	failed := 0
	for _, tr := range rep.Targets {
		if tr.Outcome != fsm.OutcomeUpdated {
			failed++
		}
	}
	if failed == 0 {
		if err := c.finish(ctx, fsm.JournalResolve{ID: id, Action: fsm.ResolveComplete, At: c.cfg.Now(), By: c.cfg.NodeID}); err != nil {
			failed = -1
			rep.Message = "every target was updated, but closing the journal record failed (" + err.Error() +
				"); the targets stay disabled until enabled or the record is resolved"
		}
	}
	switch {
	case failed == 0:
		rep.Success, rep.Result = true, "ok"
		rep.Message = fmt.Sprintf("updated %d workers", len(targets))
	case failed > 0:
		rep.Result = "failed"
		// The record now reads failed on every gateway (fsm.JournalRecord.State: every outcome is
		// in, one not updated) once they applied the outcomes.
		c.acknowledge(ctx, id, last) // the outcomes the answer lists, on every gateway
		rep.Message = fmt.Sprintf("%d of %d workers were not updated; journal record %s stays open and its workers stay disabled: verify each, then enable it, or resolve the record",
			failed, len(targets), id)
	default:
		rep.Result = "failed"
	}
	c.cfg.Metrics.count(rep.Result)
	c.log.Info("weight update finished", "id", id, "result", rep.Result, "targets", len(targets))
	return rep, nil
}

// pick returns the target records, sorted by id.
func (c *Coordinator) pick(t Target) ([]fsm.Record, error) {
	all := c.cfg.Records.Workers()
	var out []fsm.Record
	if len(t.IDs) > 0 {
		byID := make(map[worker.ID]fsm.Record, len(all))
		for _, r := range all {
			byID[r.ID] = r
		}
		for _, id := range t.IDs {
			r, ok := byID[id]
			switch {
			case !ok:
				return nil, &InputError{Msg: "worker " + string(id) + " is not registered"}
			case !engineHTTP(r):
				return nil, &InputError{Msg: "worker " + string(id) + " is not an HTTP engine worker; weight updates go to SGLang engines over HTTP"}
			case slices.ContainsFunc(out, func(o fsm.Record) bool { return o.ID == id }):
				continue
			}
			out = append(out, r)
		}
	} else {
		for _, r := range all {
			if engineHTTP(r) && !r.Disabled && !r.IsDead && !r.Draining &&
				(t.Model == "" || slices.Contains(r.Spec.ModelList(), t.Model)) {
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		msg := "no enabled HTTP engine worker to update"
		if t.Model != "" {
			msg = "no enabled HTTP engine worker serves model " + t.Model
		}
		return nil, &InputError{Msg: msg}
	}
	slices.SortFunc(out, func(a, b fsm.Record) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func engineHTTP(r fsm.Record) bool {
	return r.Spec.ConnectionMode == worker.ModeHTTP && r.Spec.Provider == ""
}

// send updates the targets, Concurrency at a time, and records each outcome as it arrives. It
// returns the highest raft index of those records.
func (c *Coordinator) send(ctx context.Context, id string, body []byte, targets []fsm.Record, out []TargetReport) uint64 {
	sem := make(chan struct{}, c.cfg.Concurrency)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last uint64
	for i, r := range targets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.TargetTimeout)
			sent := c.cfg.Send.Send(tctx, r.Spec, body)
			cancel()
			out[i].Outcome, out[i].Status, out[i].Message = sent.Outcome, sent.Status, sent.Message
			c.log.Info("weight update of a worker", "id", id, "worker", r.ID, "outcome", sent.Outcome, "status", sent.Status)
			index, err := c.resolveIndex(fsm.JournalResolve{ID: id, Action: fsm.ResolveOutcome, Target: r.ID, Outcome: sent.Outcome,
				At: c.cfg.Now(), By: c.cfg.NodeID})
			if err != nil {
				c.log.Warn("recording a weight update's outcome failed; the record shows it pending", "id", id, "worker", r.ID, "err", err)
				return
			}
			mu.Lock()
			last = max(last, index)
			mu.Unlock()
		})
	}
	wg.Wait()
	return last
}

// acknowledge waits for the fleet to apply index, logging the gateways that lag.
func (c *Coordinator) acknowledge(ctx context.Context, id string, index uint64) {
	if c.cfg.Fleet == nil || index == 0 {
		return
	}
	if ack := c.cfg.Fleet.Acknowledge(ctx, index); len(ack.Lagging) > 0 {
		c.log.Warn("gateways did not apply a weight update's journal in time", "id", id, "lagging", ack.Lagging)
	}
}

// resolve applies a journal change, bounded by resolveBound.
func (c *Coordinator) resolve(cmd fsm.JournalResolve) error {
	_, err := c.resolveIndex(cmd)
	return err
}

// resolveIndex is resolve returning the entry's index.
func (c *Coordinator) resolveIndex(cmd fsm.JournalResolve) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), resolveBound)
	defer cancel()
	res, err := c.cfg.Writer.Apply(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	return res.Index, err
}

// finish closes the record (complete or not_started) and waits for the fleet to apply it, so
// that the answer's promise (the targets enabled again) holds on every gateway when it is sent.
func (c *Coordinator) finish(ctx context.Context, cmd fsm.JournalResolve) error {
	index, err := c.resolveIndex(cmd)
	if err != nil {
		return err
	}
	c.acknowledge(ctx, cmd.ID, index)
	return nil
}

func (c *Coordinator) setRunning(id string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on {
		c.running[id] = true
	} else {
		delete(c.running, id)
	}
}

// Running reports whether this process runs the update id.
func (c *Coordinator) Running(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running[id]
}

// newID makes a journal record id.
func newID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make a weight update id: %w", err)
	}
	return "wu-" + hex.EncodeToString(b[:]), nil
}
