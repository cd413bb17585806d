package check

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/meshgw/meshgw/test/chaos/history"
)

// record is the model of one worker record: whether it exists, and its disabled flag.
type record struct{ Exists, Disabled bool }

// lin is one admin operation as the model reads it.
type lin struct {
	kind     history.Kind
	unknown  bool
	status   int  // of a known outcome
	found    bool // a read's answer
	disabled bool
}

// workerModel is the sequential specification of one worker record under register, disable,
// enable and consistent reads. An unknown operation may take effect at any point after its
// invocation (its response time is history.Never), or never: the checker may place it after
// every other one.
var workerModel = porcupine.Model{
	Init: func() any { return record{} },
	Step: func(state, input, _ any) (bool, any) {
		s, op := state.(record), input.(lin)
		switch op.kind {
		case history.Register:
			if op.unknown {
				return true, record{Exists: true, Disabled: s.Exists && s.Disabled}
			}
			// 201: it did not exist; 200: the same spec was there (docs/chaos.md, finding 3).
			if (op.status == 201) == s.Exists {
				return false, s
			}
			return true, record{Exists: true, Disabled: s.Disabled}
		case history.Disable, history.Enable:
			want := op.kind == history.Disable
			if op.unknown {
				if s.Exists {
					s.Disabled = want
				}
				return true, s
			}
			if op.status == 404 {
				return !s.Exists, s
			}
			return s.Exists, record{Exists: true, Disabled: want}
		case history.Read:
			if !op.found {
				return !s.Exists, s
			}
			return s.Exists && s.Disabled == op.disabled, s
		}
		return false, s
	},
	DescribeOperation: func(input, _ any) string {
		op := input.(lin)
		switch {
		case op.unknown:
			return string(op.kind) + " -> unknown"
		case op.kind == history.Read:
			return fmt.Sprintf("read -> found=%v disabled=%v", op.found, op.disabled)
		}
		return fmt.Sprintf("%s -> %d", op.kind, op.status)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%+v", state.(record)) },
}

// Linearizable checks with Porcupine that the admin history of every worker record is
// linearizable against workerModel. Failed operations (nothing written) are left out, and so
// are the targets of weight updates, whose flags an update changes in several steps.
func Linearizable(h history.History, timeout time.Duration) Result {
	byWorker := map[string][]porcupine.Operation{}
	ops := 0
	for _, a := range h.Admin {
		switch {
		case h.Weights[a.Worker] || a.Outcome == history.Failed:
			continue
		case a.Kind != history.Register && a.Kind != history.Disable && a.Kind != history.Enable && a.Kind != history.Read:
			continue // weight updates, transfers: not in the model
		}
		if a.Outcome == history.Unknown && a.Kind == history.Read {
			continue
		}
		op := lin{kind: a.Kind, unknown: a.Outcome == history.Unknown, status: a.Status, found: a.Found, disabled: a.Disabled}
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
