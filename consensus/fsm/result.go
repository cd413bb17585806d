package fsm

import (
	"errors"
	"fmt"

	"github.com/meshgw/meshgw/worker"
)

// Outcome says what applying a command did.
type Outcome uint8

// The outcomes. Rejected goes with a business error in Result.Err; every other outcome has none.
const (
	// Rejected: a business error (not found, conflict, invalid); nothing changed.
	Rejected Outcome = iota
	// Unchanged: the command asked for what the state already was (admin answers 200).
	Unchanged
	// Created: a new record, or the cluster id (admin answers 201).
	Created
	// Updated: an existing record changed (admin answers 200).
	Updated
	// Removed: a record was deleted.
	Removed
	// Ignored: an unknown command type carrying IgnoreUnknownFlag was skipped.
	Ignored
)

var outcomeNames = [...]string{"rejected", "unchanged", "created", "updated", "removed", "ignored"}

// String names the outcome.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Changed reports whether the state changed.
func (o Outcome) Changed() bool { return o == Created || o == Updated || o == Removed }

// Result is what applying one command returned. It is the same on every node.
type Result struct {
	// Index is the raft index of the entry.
	Index   uint64
	Outcome Outcome
	// Record is a copy of the record after the command: the new or updated record, the one that
	// was already there (Unchanged, and a conflict with another spec), or the one just deleted
	// (Removed). Nil when the command names no existing record.
	Record *Record
	// Err is the business error of a Rejected command: *NotFoundError, *ConflictError or
	// *InvalidError.
	Err error
	// Reassign is what a Reassign or OperatorReassign entry moved and skipped; nil for every other
	// command and for a rejected one.
	Reassign *ReassignResult
	// Journal is a copy of the weight-update record a journal command opened, changed or closed
	// (Removed); nil for every other command.
	Journal *JournalRecord
	// Resent is set by consensus/forward's Forwarder when this is the answer of a re-sent copy,
	// after an attempt that ended without the leader's answer and may have applied: an Unchanged
	// answer may then be the write's own first copy (a registration's first copy created the
	// record).
	Resent bool
}

// Sentinels for errors.Is. The admin API maps them to 404, 409 and 400.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrInvalid  = errors.New("invalid command")
)

// NotFoundError says the command names a worker that has no record, or (Journal) a weight
// update that is not open.
type NotFoundError struct {
	ID      worker.ID
	Journal string
}

func (e *NotFoundError) Error() string {
	if e.Journal != "" {
		return "weight update " + e.Journal + " is not open"
	}
	return "worker " + string(e.ID) + " not found"
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// ConflictError says the state does not allow the command: another spec under the same id, a
// compare-and-set that lost (revision, epoch, fence), or another cluster id.
type ConflictError struct {
	ID     worker.ID
	Reason string
}

func (e *ConflictError) Error() string {
	if e.ID == "" {
		return "conflict: " + e.Reason
	}
	return "worker " + string(e.ID) + ": conflict: " + e.Reason
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// InvalidError says the command itself is malformed (a required field empty). The proposer
// validates its input first, so this is a last line of defence.
type InvalidError struct {
	Field string
	Msg   string
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return "invalid command: " + e.Msg
	}
	return "invalid command: " + e.Field + ": " + e.Msg
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func rejected(err error, rec *Record) Result {
	return Result{Outcome: Rejected, Err: err, Record: rec}
}

func notFound(id worker.ID) Result { return rejected(&NotFoundError{ID: id}, nil) }

func conflict(rec *Record, format string, args ...any) Result {
	return rejected(&ConflictError{ID: rec.ID, Reason: fmt.Sprintf(format, args...)}, rec)
}

func invalid(field, msg string) Result { return rejected(&InvalidError{Field: field, Msg: msg}, nil) }
