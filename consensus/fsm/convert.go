package fsm

import (
	"time"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/worker"
)

// The spec travels as a protobuf mirror of worker.Spec rather than as JSON bytes: the log and
// snapshots then have a schema with stable field numbers that outlives Go refactors of
// worker.Spec (a JSON tag renamed in Go would silently drop a field from old entries), and the
// api_key, which worker.Spec's JSON form is meant to keep out, travels as a field of its own.
// TestSpecMirrorComplete fails when worker.Spec gains a field that is not mirrored here.
//
// Conversions from protobuf give nil for empty slices and maps, so two specs that went through
// protobuf compare equal with reflect.DeepEqual exactly when their encodings mean the same.

func specToProto(s *worker.Spec) *consensusv1.WorkerSpec {
	return &consensusv1.WorkerSpec{
		Url:            s.URL,
		ConnectionMode: s.ConnectionMode,
		Provider:       s.Provider,
		Model:          s.Model,
		Models:         s.Models,
		Capabilities:   s.Capabilities,
		Labels:         s.Labels,
		Priority:       intPtrTo64(s.Priority),
		Cost:           s.Cost,
		Region:         s.Region,
		ApiKey:         s.APIKey,
		DpRank:         intPtrTo64(s.DPRank),
		Health:         healthToProto(s.Health),
		Resilience:     resilienceToProto(s.Resilience),
	}
}

func specFromProto(p *consensusv1.WorkerSpec) worker.Spec {
	if p == nil {
		return worker.Spec{}
	}
	return worker.Spec{
		URL:            p.Url,
		ConnectionMode: p.ConnectionMode,
		Provider:       p.Provider,
		Model:          p.Model,
		Models:         nilIfEmpty(p.Models),
		Capabilities:   nilIfEmpty(p.Capabilities),
		Labels:         nilMapIfEmpty(p.Labels),
		Priority:       int64PtrToInt(p.Priority),
		Cost:           clonePtr(p.Cost),
		Region:         p.Region,
		APIKey:         p.ApiKey,
		DPRank:         int64PtrToInt(p.DpRank),
		Health:         healthFromProto(p.Health),
		Resilience:     resilienceFromProto(p.Resilience),
	}
}

func healthToProto(h *worker.Health) *consensusv1.HealthOverrides {
	if h == nil {
		return nil
	}
	return &consensusv1.HealthOverrides{
		CheckIntervalSecs:  intPtrTo64(h.CheckIntervalSecs),
		TimeoutSecs:        intPtrTo64(h.TimeoutSecs),
		FailureThreshold:   intPtrTo64(h.FailureThreshold),
		SuccessThreshold:   intPtrTo64(h.SuccessThreshold),
		DisableHealthCheck: h.DisableHealthCheck,
		DrainSettleSecs:    intPtrTo64(h.DrainSettleSecs),
		LlmProbeModel:      h.LLMProbeModel,
	}
}

func healthFromProto(p *consensusv1.HealthOverrides) *worker.Health {
	if p == nil {
		return nil
	}
	return &worker.Health{
		CheckIntervalSecs:  int64PtrToInt(p.CheckIntervalSecs),
		TimeoutSecs:        int64PtrToInt(p.TimeoutSecs),
		FailureThreshold:   int64PtrToInt(p.FailureThreshold),
		SuccessThreshold:   int64PtrToInt(p.SuccessThreshold),
		DisableHealthCheck: clonePtr(p.DisableHealthCheck),
		DrainSettleSecs:    int64PtrToInt(p.DrainSettleSecs),
		LLMProbeModel:      clonePtr(p.LlmProbeModel),
	}
}

func resilienceToProto(r *worker.Resilience) *consensusv1.ResilienceOverrides {
	if r == nil {
		return nil
	}
	return &consensusv1.ResilienceOverrides{
		CapacityStatusCodes:  intsTo64(r.CapacityStatusCodes),
		RetryableStatusCodes: intsTo64(r.RetryableStatusCodes),
		CbFailureThreshold:   intPtrTo64(r.CBFailureThreshold),
		CbSuccessThreshold:   intPtrTo64(r.CBSuccessThreshold),
		CbTimeoutSecs:        intPtrTo64(r.CBTimeoutSecs),
		MaxRetries:           intPtrTo64(r.MaxRetries),
		DisableRetry:         r.DisableRetry,
	}
}

func resilienceFromProto(p *consensusv1.ResilienceOverrides) *worker.Resilience {
	if p == nil {
		return nil
	}
	return &worker.Resilience{
		CapacityStatusCodes:  int64sToInt(p.CapacityStatusCodes),
		RetryableStatusCodes: int64sToInt(p.RetryableStatusCodes),
		CBFailureThreshold:   int64PtrToInt(p.CbFailureThreshold),
		CBSuccessThreshold:   int64PtrToInt(p.CbSuccessThreshold),
		CBTimeoutSecs:        int64PtrToInt(p.CbTimeoutSecs),
		MaxRetries:           int64PtrToInt(p.MaxRetries),
		DisableRetry:         clonePtr(p.DisableRetry),
	}
}

// RecordToProto encodes a record as snapshots and raft entries carry it, API key included:
// forwarding (package consensus) answers a leader's result in this form.
func RecordToProto(r *Record) *consensusv1.WorkerRecord { return recordToProto(r) }

// RecordFromProto decodes what RecordToProto encoded.
func RecordFromProto(p *consensusv1.WorkerRecord) *Record { return recordFromProto(p) }

func recordToProto(r *Record) *consensusv1.WorkerRecord {
	return &consensusv1.WorkerRecord{
		Id:                     string(r.ID),
		Spec:                   specToProto(&r.Spec),
		Owner:                  r.Owner,
		Epoch:                  r.Epoch,
		Disabled:               r.Disabled,
		DisabledReason:         r.DisabledReason,
		DisabledBy:             r.DisabledBy,
		DisabledAtUnixNano:     unixNano(r.DisabledAt),
		IsDead:                 r.IsDead,
		RegisteredAtUnixNano:   unixNano(r.RegisteredAt),
		Revision:               r.Revision,
		Draining:               r.Draining,
		DrainStartedAtUnixNano: unixNano(r.DrainStartedAt),
		DrainSettleNanos:       int64(r.DrainSettle),
	}
}

func recordFromProto(p *consensusv1.WorkerRecord) *Record {
	return &Record{
		ID:             worker.ID(p.Id),
		Spec:           specFromProto(p.Spec),
		Owner:          p.Owner,
		Epoch:          p.Epoch,
		Disabled:       p.Disabled,
		DisabledReason: p.DisabledReason,
		DisabledBy:     p.DisabledBy,
		DisabledAt:     fromUnixNano(p.DisabledAtUnixNano),
		IsDead:         p.IsDead,
		RegisteredAt:   fromUnixNano(p.RegisteredAtUnixNano),
		Revision:       p.Revision,
		Draining:       p.Draining,
		DrainStartedAt: fromUnixNano(p.DrainStartedAtUnixNano),
		DrainSettle:    time.Duration(p.DrainSettleNanos),
	}
}

func journalToProto(j *JournalRecord) *consensusv1.JournalRecord {
	p := &consensusv1.JournalRecord{
		Id:                j.ID,
		Coordinator:       j.Coordinator,
		StartedAtUnixNano: unixNano(j.StartedAt),
		Status:            j.Status,
	}
	for _, t := range j.Targets {
		p.Targets = append(p.Targets, string(t))
	}
	for _, t := range j.PriorDisabled {
		p.PriorDisabled = append(p.PriorDisabled, string(t))
	}
	if len(j.Outcomes) > 0 {
		p.Outcomes = make(map[string]string, len(j.Outcomes))
		for id, o := range j.Outcomes {
			p.Outcomes[string(id)] = o
		}
	}
	return p
}

func journalFromProto(p *consensusv1.JournalRecord) *JournalRecord {
	j := &JournalRecord{
		ID:          p.Id,
		Coordinator: p.Coordinator,
		StartedAt:   fromUnixNano(p.StartedAtUnixNano),
		Status:      p.Status,
	}
	for _, t := range p.Targets {
		j.Targets = append(j.Targets, worker.ID(t))
	}
	for _, t := range p.PriorDisabled {
		j.PriorDisabled = append(j.PriorDisabled, worker.ID(t))
	}
	if len(p.Outcomes) > 0 {
		j.Outcomes = make(map[worker.ID]string, len(p.Outcomes))
		for id, o := range p.Outcomes {
			j.Outcomes[worker.ID(id)] = o
		}
	}
	return j
}

// unixNano maps the zero time to 0 so that "unset" survives the round trip.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func intPtrTo64(p *int) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

func int64PtrToInt(p *int64) *int {
	if p == nil {
		return nil
	}
	v := int(*p)
	return &v
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func intsTo64(s []int) []int64 {
	if len(s) == 0 {
		return nil
	}
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

func int64sToInt(s []int64) []int {
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

func nilMapIfEmpty[K comparable, V any](m map[K]V) map[K]V {
	if len(m) == 0 {
		return nil
	}
	return m
}
