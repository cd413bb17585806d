package check

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/meshgw/meshgw/test/chaos/history"
)

// record is the model of one worker record: whether it exists, its disabled flag, and whether
// it is draining (a DELETE answered 202: its owner removes it at the drain's deadline).
type record struct{ Exists, Disabled, Draining bool }

// lin is one admin operation as the model reads it.
type lin struct {
	kind     history.Kind
	unknown  bool
	status   int  // of a known outcome
	found    bool // a read's answer
	disabled bool
	draining bool
}

// workerModel is the sequential specification of one worker record under register, disable,
// enable, delete and consistent reads. It is nondeterministic: a draining record may be gone
// before any operation (its owner removes it on its own, at the deadline), and an unknown
// operation may or may not take effect; when it does, at any point after its invocation (its
// response time is history.Never).
var workerModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{record{}} },
	Step: func(state, input, _ any) []any {
		s, op := state.(record), input.(lin)
		from := []record{s}
		if s.Draining {
			from = append(from, record{}) // its owner removed it
		}
		var out []any
		for _, r := range from {
			for _, next := range stepRecord(r, op) {
				out = append(out, next)
			}
		}
		return out
	},
	DescribeOperation: func(input, _ any) string {
		op := input.(lin)
		switch {
		case op.unknown:
			return string(op.kind) + " -> unknown"
		case op.kind == history.Read:
			return fmt.Sprintf("read -> found=%v disabled=%v draining=%v", op.found, op.disabled, op.draining)
		}
		return fmt.Sprintf("%s -> %d", op.kind, op.status)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%+v", state.(record)) },
}).ToModel()

// stepRecord returns the records op may leave from s, none when op's answer cannot come from s.
func stepRecord(s record, op lin) []record {
	switch op.kind {
	case history.Register:
		created := s
		if !s.Exists {
			created = record{Exists: true}
		}
		switch {
		case op.unknown:
			return []record{s, created}
		case op.status == 201 && !s.Exists:
			return []record{created}
		case op.status == 200 && s.Exists && !s.Draining:
			return []record{s} // the same spec was there
		case op.status == 409 && s.Draining:
			return []record{s} // refused: the record is being removed
		}
	case history.Disable, history.Enable:
		set := s
		if s.Exists {
			set.Disabled = op.kind == history.Disable
		}
		switch {
		case op.unknown:
			return []record{s, set}
		case op.status == 404 && !s.Exists, op.status == 200 && s.Exists:
			return []record{set}
		}
	case history.Delete:
		drained := s
		if s.Exists {
			drained.Draining = true
		}
		switch {
		case op.unknown:
			return []record{s, drained} // removed at once: drained, then gone before the next
		case op.status == 202 && s.Exists:
			return []record{drained}
		case op.status == 200:
			return []record{{}} // gone: removed now, or already by the drain's owner
		case op.status == 404 && !s.Exists:
			return []record{s}
		}
	case history.Read:
		switch {
		case !op.found && !s.Exists:
			return []record{s}
		case op.found && s.Exists && s.Disabled == op.disabled && s.Draining == op.draining:
			return []record{s}
		}
	}
	return nil
}

// modelKinds are the operations workerModel reads.
var modelKinds = []history.Kind{history.Register, history.Disable, history.Enable, history.Delete, history.Read}

// Linearizable checks with Porcupine that the admin history of every worker record is
// linearizable against workerModel. Failed operations (nothing written) are left out, and so
// are the targets of weight updates, whose flags an update changes in several steps.
func Linearizable(h history.History, timeout time.Duration) Result {
	byWorker := map[string][]porcupine.Operation{}
	ops := 0
	for _, a := range h.Admin {
		// A registration refused because the record drains says what it saw; other refusals
		// wrote nothing and say nothing.
		refusedDraining := a.Kind == history.Register && a.Status == 409 && a.Code == "worker_exists"
		switch {
		case h.Weights[a.Worker] || (a.Outcome == history.Failed && !refusedDraining):
			continue
		case !slices.Contains(modelKinds, a.Kind):
			continue // weight updates, transfers, rebalances: not in the model
		}
		if a.Outcome == history.Unknown && a.Kind == history.Read {
			continue
		}
		op := lin{kind: a.Kind, unknown: a.Outcome == history.Unknown, status: a.Status, found: a.Found, disabled: a.Disabled, draining: a.Draining}
		byWorker[a.Worker] = append(byWorker[a.Worker], porcupine.Operation{
			ClientId: a.Client, Input: op, Call: int64(a.Invoke), Return: int64(a.Complete),
		})
		ops++
	}
	workers := make([]string, 0, len(byWorker))
	for w := range byWorker {
		workers = append(workers, w)
	}
	sort.Strings(workers)
	for _, w := range workers {
		switch porcupine.CheckOperationsTimeout(workerModel, byWorker[w], timeout) {
		case porcupine.Illegal:
			return Fail("the history of %s (%d operations) is not linearizable", w, len(byWorker[w]))
		case porcupine.Unknown:
			return Fail("porcupine did not decide %s's history of %d operations within %v", w, len(byWorker[w]), timeout)
		}
	}
	return Pass("%d operations on %d worker records are linearizable", ops, len(workers))
}
