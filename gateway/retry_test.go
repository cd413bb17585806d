package gateway

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/meshgw/meshgw/worker"
)

// A worker's retryable_status_codes does not change what the gateway retries (SMG): a worker
// that lists only 500 gets as many attempts on 408, 429, 502, 503 and 504 as a default worker,
// and a status it adds (418) is not retried.
func TestWorkerRetryableCodesDoNotChangeRetries(t *testing.T) {
	for _, st := range []int{408, 429, 500, 502, 503, 504, 418} {
		want := int32(3)
		if st == 418 {
			want = 1
		}
		for _, codes := range [][]int{nil, {500}, {418, 500}} {
			e := newEnv(t, Config{Retry: RetryConfig{MaxAttempts: 3}})
			var hits atomic.Int32
			e.upstream(func(rw http.ResponseWriter, r *http.Request) { hits.Add(1); rw.WriteHeader(st) },
				func(s *worker.Spec) {
					if codes != nil {
						s.Resilience = &worker.Resilience{RetryableStatusCodes: codes}
					}
				})
			if status, _, _ := e.post("/v1/completions", `{}`); status != st {
				t.Errorf("status %d, want the worker's %d", status, st)
			}
			if hits.Load() != want {
				t.Errorf("worker retryable_status_codes %v, answer %d: %d attempts, want %d", codes, st, hits.Load(), want)
			}
		}
	}
}
