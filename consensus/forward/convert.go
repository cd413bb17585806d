package forward

import (
	"errors"
	"fmt"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

// The wire form of an fsm.Result in a forwarding answer. The record goes as the snapshot
// encodes it (fsm.RecordToProto and fsm.RecordFromProto); TestForwardResultRoundTrip fails when
// a field of Record or Spec does not survive. Result.Reassign travels for OperatorReassign entries,
// which gateways forward; failover applies Reassign on the leader, never through a forwarder.

var outcomeToWire = map[fsm.Outcome]consensusv1.ApplyOutcome{
	fsm.Rejected:  consensusv1.ApplyOutcome_APPLY_OUTCOME_REJECTED,
	fsm.Unchanged: consensusv1.ApplyOutcome_APPLY_OUTCOME_UNCHANGED,
	fsm.Created:   consensusv1.ApplyOutcome_APPLY_OUTCOME_CREATED,
	fsm.Updated:   consensusv1.ApplyOutcome_APPLY_OUTCOME_UPDATED,
	fsm.Removed:   consensusv1.ApplyOutcome_APPLY_OUTCOME_REMOVED,
	fsm.Ignored:   consensusv1.ApplyOutcome_APPLY_OUTCOME_IGNORED,
}

var outcomeFromWire = func() map[consensusv1.ApplyOutcome]fsm.Outcome {
	m := make(map[consensusv1.ApplyOutcome]fsm.Outcome, len(outcomeToWire))
	for o, w := range outcomeToWire {
		m[w] = o
	}
	return m
}()

// resultToWire fills the APPLIED fields of an answer from res.
func resultToWire(res fsm.Result) *consensusv1.ApplyResponse {
	out := &consensusv1.ApplyResponse{
		Status:  consensusv1.ApplyStatus_APPLY_STATUS_APPLIED,
		Index:   res.Index,
		Outcome: outcomeToWire[res.Outcome], // an outcome this version does not name is UNSPECIFIED
	}
	if res.Record != nil {
		out.Record = fsm.RecordToProto(res.Record)
	}
	if res.Err != nil {
		out.Error = businessErrorToWire(res.Err)
	}
	if r := res.Reassign; r != nil {
		out.Reassign = &consensusv1.ReassignOutcome{}
		for _, id := range r.Moved {
			out.Reassign.Moved = append(out.Reassign.Moved, string(id))
		}
		for _, s := range r.Skipped {
			out.Reassign.Skipped = append(out.Reassign.Skipped, &consensusv1.ReassignSkipped{Id: string(s.ID), Reason: s.Reason})
		}
	}
	return out
}

// reassignFromWire rebuilds Result.Reassign; nil when the answer carries none.
func reassignFromWire(r *consensusv1.ReassignOutcome) *fsm.ReassignResult {
	if r == nil {
		return nil
	}
	out := &fsm.ReassignResult{}
	for _, id := range r.Moved {
		out.Moved = append(out.Moved, worker.ID(id))
	}
	for _, s := range r.Skipped {
		out.Skipped = append(out.Skipped, fsm.ReassignSkip{ID: worker.ID(s.Id), Reason: s.Reason})
	}
	return out
}

// resultFromWire rebuilds the Result of an APPLIED answer. An outcome or error kind this
// version does not know (a newer leader) is an error: the entry applied, but what it did cannot
// be told, so the caller gets consensus.ErrOutcomeUnknown rather than a guess.
func resultFromWire(a *consensusv1.ApplyResponse) (fsm.Result, error) {
	o, ok := outcomeFromWire[a.Outcome]
	if !ok {
		return fsm.Result{}, fmt.Errorf("%w: the leader applied index %d with an outcome this version does not know (%d)",
			consensus.ErrOutcomeUnknown, a.Index, a.Outcome)
	}
	res := fsm.Result{Index: a.Index, Outcome: o, Reassign: reassignFromWire(a.Reassign)}
	if a.Record != nil {
		res.Record = fsm.RecordFromProto(a.Record)
	}
	if a.Error != nil {
		err, ok := businessErrorFromWire(a.Error)
		if !ok {
			return fsm.Result{}, fmt.Errorf("%w: the leader rejected index %d with an error this version does not know (%d: %s)",
				consensus.ErrOutcomeUnknown, a.Index, a.Error.Kind, a.Error.Message)
		}
		res.Err = err
	}
	return res, nil
}

func businessErrorToWire(err error) *consensusv1.BusinessError {
	var (
		nf *fsm.NotFoundError
		ce *fsm.ConflictError
		ie *fsm.InvalidError
	)
	switch {
	case errors.As(err, &nf):
		if nf.Journal != "" { // a weight update that is not open: its id travels as Message
			return &consensusv1.BusinessError{Kind: consensusv1.BusinessErrorKind_BUSINESS_ERROR_KIND_NOT_FOUND, Field: "journal", Message: nf.Journal}
		}
		return &consensusv1.BusinessError{Kind: consensusv1.BusinessErrorKind_BUSINESS_ERROR_KIND_NOT_FOUND, WorkerId: string(nf.ID)}
	case errors.As(err, &ce):
		return &consensusv1.BusinessError{Kind: consensusv1.BusinessErrorKind_BUSINESS_ERROR_KIND_CONFLICT, WorkerId: string(ce.ID), Reason: ce.Reason}
	case errors.As(err, &ie):
		return &consensusv1.BusinessError{Kind: consensusv1.BusinessErrorKind_BUSINESS_ERROR_KIND_INVALID, Field: ie.Field, Message: ie.Msg}
	}
	return &consensusv1.BusinessError{Message: err.Error()} // UNSPECIFIED: the caller cannot rebuild it
}

func businessErrorFromWire(b *consensusv1.BusinessError) (error, bool) {
	switch b.Kind {
	case consensusv1.BusinessErrorKind_BUSINESS_ERROR_KIND_NOT_FOUND:
		if b.Field == "journal" {
			return &fsm.NotFoundError{Journal: b.Message}, true
		}
		return &fsm.NotFoundError{ID: worker.ID(b.WorkerId)}, true
	case consensusv1.BusinessErrorKind_BUSINESS_ERROR_KIND_CONFLICT:
		return &fsm.ConflictError{ID: worker.ID(b.WorkerId), Reason: b.Reason}, true
	case consensusv1.BusinessErrorKind_BUSINESS_ERROR_KIND_INVALID:
		return &fsm.InvalidError{Field: b.Field, Msg: b.Message}, true
	}
	return nil, false
}
