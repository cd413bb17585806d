package consensus

import (
	"errors"
	"fmt"
	"time"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

// The wire form of an fsm.Result in a forwarding answer. The record conversion mirrors package
// fsm's own (convert.go, unexported there); TestForwardRecordMatchesSnapshot fails when the two
// disagree, and TestForwardResultRoundTrip when a field of Record or Spec does not survive.

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
		out.Record = recordToWire(res.Record)
	}
	if res.Err != nil {
		out.Error = businessErrorToWire(res.Err)
	}
	return out
}

// resultFromWire rebuilds the Result of an APPLIED answer. An outcome or error kind this
// version does not know (a newer leader) is an error: the entry applied, but what it did cannot
// be told, so the caller gets ErrOutcomeUnknown rather than a guess.
func resultFromWire(a *consensusv1.ApplyResponse) (fsm.Result, error) {
	o, ok := outcomeFromWire[a.Outcome]
	if !ok {
		return fsm.Result{}, fmt.Errorf("%w: the leader applied index %d with an outcome this version does not know (%d)",
			ErrOutcomeUnknown, a.Index, a.Outcome)
	}
	res := fsm.Result{Index: a.Index, Outcome: o}
	if a.Record != nil {
		res.Record = recordFromWire(a.Record)
	}
	if a.Error != nil {
		err, ok := businessErrorFromWire(a.Error)
		if !ok {
			return fsm.Result{}, fmt.Errorf("%w: the leader rejected index %d with an error this version does not know (%d: %s)",
				ErrOutcomeUnknown, a.Index, a.Error.Kind, a.Error.Message)
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
		return &fsm.NotFoundError{ID: worker.ID(b.WorkerId)}, true
	case consensusv1.BusinessErrorKind_BUSINESS_ERROR_KIND_CONFLICT:
		return &fsm.ConflictError{ID: worker.ID(b.WorkerId), Reason: b.Reason}, true
	case consensusv1.BusinessErrorKind_BUSINESS_ERROR_KIND_INVALID:
		return &fsm.InvalidError{Field: b.Field, Msg: b.Message}, true
	}
	return nil, false
}

func recordToWire(r *fsm.Record) *consensusv1.WorkerRecord {
	return &consensusv1.WorkerRecord{
		Id:                   string(r.ID),
		Spec:                 specToWire(&r.Spec),
		Owner:                r.Owner,
		Epoch:                r.Epoch,
		Disabled:             r.Disabled,
		DisabledReason:       r.DisabledReason,
		DisabledBy:           r.DisabledBy,
		DisabledAtUnixNano:   wireNano(r.DisabledAt),
		IsDead:               r.IsDead,
		RegisteredAtUnixNano: wireNano(r.RegisteredAt),
		Revision:             r.Revision,
	}
}

func recordFromWire(p *consensusv1.WorkerRecord) *fsm.Record {
	return &fsm.Record{
		ID:             worker.ID(p.Id),
		Spec:           specFromWire(p.Spec),
		Owner:          p.Owner,
		Epoch:          p.Epoch,
		Disabled:       p.Disabled,
		DisabledReason: p.DisabledReason,
		DisabledBy:     p.DisabledBy,
		DisabledAt:     timeFromWire(p.DisabledAtUnixNano),
		IsDead:         p.IsDead,
		RegisteredAt:   timeFromWire(p.RegisteredAtUnixNano),
		Revision:       p.Revision,
	}
}

func specToWire(s *worker.Spec) *consensusv1.WorkerSpec {
	p := &consensusv1.WorkerSpec{
		Url:            s.URL,
		ConnectionMode: s.ConnectionMode,
		Provider:       s.Provider,
		Model:          s.Model,
		Models:         s.Models,
		Capabilities:   s.Capabilities,
		Labels:         s.Labels,
		Priority:       int64Ptr(s.Priority),
		Cost:           s.Cost,
		Region:         s.Region,
		ApiKey:         s.APIKey,
		DpRank:         int64Ptr(s.DPRank),
	}
	if h := s.Health; h != nil {
		p.Health = &consensusv1.HealthOverrides{
			CheckIntervalSecs:  int64Ptr(h.CheckIntervalSecs),
			TimeoutSecs:        int64Ptr(h.TimeoutSecs),
			FailureThreshold:   int64Ptr(h.FailureThreshold),
			SuccessThreshold:   int64Ptr(h.SuccessThreshold),
			DisableHealthCheck: h.DisableHealthCheck,
			DrainSettleSecs:    int64Ptr(h.DrainSettleSecs),
			LlmProbeModel:      h.LLMProbeModel,
		}
	}
	if r := s.Resilience; r != nil {
		p.Resilience = &consensusv1.ResilienceOverrides{
			CapacityStatusCodes:  int64s(r.CapacityStatusCodes),
			RetryableStatusCodes: int64s(r.RetryableStatusCodes),
			CbFailureThreshold:   int64Ptr(r.CBFailureThreshold),
			CbSuccessThreshold:   int64Ptr(r.CBSuccessThreshold),
			CbTimeoutSecs:        int64Ptr(r.CBTimeoutSecs),
			MaxRetries:           int64Ptr(r.MaxRetries),
			DisableRetry:         r.DisableRetry,
		}
	}
	return p
}

// specFromWire gives nil for empty slices and maps, as package fsm does, so that a forwarded
// record compares equal to the applied one.
func specFromWire(p *consensusv1.WorkerSpec) worker.Spec {
	if p == nil {
		return worker.Spec{}
	}
	s := worker.Spec{
		URL:            p.Url,
		ConnectionMode: p.ConnectionMode,
		Provider:       p.Provider,
		Model:          p.Model,
		Models:         nilIfEmpty(p.Models),
		Capabilities:   nilIfEmpty(p.Capabilities),
		Priority:       intPtr(p.Priority),
		Cost:           p.Cost,
		Region:         p.Region,
		APIKey:         p.ApiKey,
		DPRank:         intPtr(p.DpRank),
	}
	if len(p.Labels) > 0 {
		s.Labels = p.Labels
	}
	if h := p.Health; h != nil {
		s.Health = &worker.Health{
			CheckIntervalSecs:  intPtr(h.CheckIntervalSecs),
			TimeoutSecs:        intPtr(h.TimeoutSecs),
			FailureThreshold:   intPtr(h.FailureThreshold),
			SuccessThreshold:   intPtr(h.SuccessThreshold),
			DisableHealthCheck: h.DisableHealthCheck,
			DrainSettleSecs:    intPtr(h.DrainSettleSecs),
			LLMProbeModel:      h.LlmProbeModel,
		}
	}
	if r := p.Resilience; r != nil {
		s.Resilience = &worker.Resilience{
			CapacityStatusCodes:  ints(r.CapacityStatusCodes),
			RetryableStatusCodes: ints(r.RetryableStatusCodes),
			CBFailureThreshold:   intPtr(r.CbFailureThreshold),
			CBSuccessThreshold:   intPtr(r.CbSuccessThreshold),
			CBTimeoutSecs:        intPtr(r.CbTimeoutSecs),
			MaxRetries:           intPtr(r.MaxRetries),
			DisableRetry:         r.DisableRetry,
		}
	}
	return s
}

// wireNano maps the zero time to 0 so that "unset" survives the round trip.
func wireNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func timeFromWire(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func int64Ptr(p *int) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

func intPtr(p *int64) *int {
	if p == nil {
		return nil
	}
	v := int(*p)
	return &v
}

func int64s(s []int) []int64 {
	if len(s) == 0 {
		return nil
	}
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

func ints(s []int64) []int {
	if len(s) == 0 {
		return nil
	}
	out := make([]int, len(s))
	for i, v := range s {
		out[i] = int(v)
	}
	return out
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}
