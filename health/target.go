package health

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// Prober checks one worker once. It must return when ctx is done: the Checker bounds each probe
// with the worker's timeout through ctx and counts the probe in flight until Probe returns.
// A nil error is a pass; a *ProbeError explains a failure.
type Prober interface {
	Probe(ctx context.Context, t Target) error
}

// ProberFunc adapts a function to Prober.
type ProberFunc func(ctx context.Context, t Target) error

// Probe calls f.
func (f ProberFunc) Probe(ctx context.Context, t Target) error { return f(ctx, t) }

// Target is what a probe needs to know about a worker.
type Target struct {
	ID   worker.ID
	URL  string // canonical URL
	Mode string // worker.ModeHTTP, ModeGRPC, ModeZMQ or ModeExternal
	// Provider is the external provider (openai, anthropic, azure_openai, gemini, ...).
	Provider string
	// APIKey is the worker's key: sent to the worker, never logged (Target's String and LogValue
	// leave it out).
	APIKey string
	// Endpoint is the path of the HTTP health check (--health-check-endpoint).
	Endpoint string
	// Service is the gRPC health service to check; "" checks the server as a whole.
	Service string
	// Timeout is the probe's time limit; ctx already carries it.
	Timeout time.Duration
	// LLMProbeModel, for external providers, replaces the free probe by a one-token completion.
	LLMProbeModel string
	// GatewayID is this gateway's node id, sent as X-Mesh-Gateway.
	GatewayID string
}

// String describes t without its API key.
func (t Target) String() string {
	return fmt.Sprintf("%s %s (%s)", t.ID, t.URL, t.Mode)
}

// LogValue keeps the API key out of logs.
func (t Target) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", string(t.ID)), slog.String("url", t.URL), slog.String("mode", t.Mode))
}

// ProbeError is a failed (or throttled) probe: what last_error and last_status_code report.
// It never holds the API key.
type ProbeError struct {
	// StatusCode is the HTTP status the worker answered, 0 when it gave none.
	StatusCode int
	// Reason is short and stable: "status 503", "timeout", "connection refused",
	// "wrong_endpoint", "key_refused", "NOT_SERVING", ...
	Reason string
	// Err is the cause, if any (ErrThrottled for a 429 that counts healthy).
	Err error
}

func (e *ProbeError) Error() string {
	if e.StatusCode != 0 && e.Reason != "status "+strconv.Itoa(e.StatusCode) {
		return fmt.Sprintf("health probe: %s (status %d)", e.Reason, e.StatusCode)
	}
	return "health probe: " + e.Reason
}

func (e *ProbeError) Unwrap() error { return e.Err }

// ErrThrottled marks a probe answered 429: the worker counts healthy, and the Checker backs its
// probing off 1, 2, 4, then 8 sweeps.
var ErrThrottled = errors.New("throttled")

// ErrTimeout is the cause of a probe that ran past its timeout.
var ErrTimeout = errors.New("timeout")

// Throttled returns the error a prober gives for a 429 answer.
func Throttled(status int) error {
	return &ProbeError{StatusCode: status, Reason: "rate_limited", Err: ErrThrottled}
}

// maxBackoffSweeps caps how many sweeps a throttled worker skips.
const maxBackoffSweeps = 8

// backoffSweeps is how many sweeps to skip after the n-th consecutive throttled probe:
// 1, 2, 4, then 8.
func backoffSweeps(n int) int {
	if n <= 0 {
		return 0
	}
	if n > 4 {
		return maxBackoffSweeps
	}
	return 1 << (n - 1)
}

// JitterOffset is the stable offset of an external provider's probes inside the first quarter of
// interval: the same for a worker id on every gateway and after every restart, so that probes of
// many providers spread out.
func JitterOffset(id worker.ID, interval time.Duration) time.Duration {
	q := interval / 4
	if q <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return time.Duration(h.Sum64() % uint64(q))
}
