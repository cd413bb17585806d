package worker

import (
	"maps"
	"slices"
)

// Clone returns a deep copy of s, API key included.
func (s *Spec) Clone() Spec {
	c := *s
	c.Models = slices.Clone(s.Models)
	c.Capabilities = slices.Clone(s.Capabilities)
	c.Labels = maps.Clone(s.Labels)
	c.Priority = clonePtr(s.Priority)
	c.Cost = clonePtr(s.Cost)
	c.DPRank = clonePtr(s.DPRank)
	if s.Health != nil {
		h := *s.Health
		h.CheckIntervalSecs = clonePtr(h.CheckIntervalSecs)
		h.TimeoutSecs = clonePtr(h.TimeoutSecs)
		h.FailureThreshold = clonePtr(h.FailureThreshold)
		h.SuccessThreshold = clonePtr(h.SuccessThreshold)
		h.DisableHealthCheck = clonePtr(h.DisableHealthCheck)
		h.DrainSettleSecs = clonePtr(h.DrainSettleSecs)
		h.LLMProbeModel = clonePtr(h.LLMProbeModel)
		c.Health = &h
	}
	if s.Resilience != nil {
		r := *s.Resilience
		r.CapacityStatusCodes = slices.Clone(r.CapacityStatusCodes)
		r.RetryableStatusCodes = slices.Clone(r.RetryableStatusCodes)
		r.CBFailureThreshold = clonePtr(r.CBFailureThreshold)
		r.CBSuccessThreshold = clonePtr(r.CBSuccessThreshold)
		r.CBTimeoutSecs = clonePtr(r.CBTimeoutSecs)
		r.MaxRetries = clonePtr(r.MaxRetries)
		r.DisableRetry = clonePtr(r.DisableRetry)
		c.Resilience = &r
	}
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
