package health

import (
	"fmt"
	"strings"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// Flag names of the health-check settings. The gateway's command line registers them (each also
// reads MESHGW_<NAME>); this package owns their defaults and validation.
const (
	FlagCheckInterval        = "health-check-interval-secs"
	FlagFailureThreshold     = "health-failure-threshold"
	FlagSuccessThreshold     = "health-success-threshold"
	FlagCheckTimeout         = "health-check-timeout-secs"
	FlagCheckEndpoint        = "health-check-endpoint"
	FlagDisableCheck         = "disable-health-check"
	FlagRemoveUnhealthy      = "remove-unhealthy-workers"
	FlagRemoveUnhealthyAlias = "worker-auto-recovery" // SMG's name for the same flag
	FlagDrainSettle          = "drain-settle-secs"
)

// Config holds the health-check flags: the fleet-wide defaults that a worker's own health block
// overrides.
type Config struct {
	// CheckIntervalSecs is the time between two probes of a worker. Default 60.
	CheckIntervalSecs int
	// FailureThreshold is F, the consecutive failures that take a ready worker to not_ready.
	// Default 3.
	FailureThreshold int
	// SuccessThreshold is S, the consecutive successes that make a worker ready. Default 2.
	SuccessThreshold int
	// TimeoutSecs bounds each probe. Default 5.
	TimeoutSecs int
	// Endpoint is the path an HTTP probe GETs. Default "/health".
	Endpoint string
	// DisableHealthCheck stops probing: workers count ready (ZMQ workers keep their local
	// check). Default false.
	DisableHealthCheck bool
	// RemoveUnhealthyWorkers removes a failed worker at once instead of probing it until it
	// returns. Default false.
	RemoveUnhealthyWorkers bool
	// DrainSettleSecs is how long a drained ready worker keeps its in-flight requests before it
	// is removed; 0 removes it at once. Default 5.
	DrainSettleSecs int
}

// DefaultConfig returns the flags' defaults.
func DefaultConfig() Config {
	return Config{
		CheckIntervalSecs: 60,
		FailureThreshold:  DefaultFailureThreshold,
		SuccessThreshold:  DefaultSuccessThreshold,
		TimeoutSecs:       5,
		Endpoint:          "/health",
		DrainSettleSecs:   5,
	}
}

// Validate returns a *worker.FieldError whose Field names the first bad flag ("--name").
func (c Config) Validate() error {
	for _, f := range []struct {
		flag string
		v    int
		min  int
	}{
		{FlagCheckInterval, c.CheckIntervalSecs, 1},
		{FlagFailureThreshold, c.FailureThreshold, 1},
		{FlagSuccessThreshold, c.SuccessThreshold, 1},
		{FlagCheckTimeout, c.TimeoutSecs, 1},
		{FlagDrainSettle, c.DrainSettleSecs, 0},
	} {
		if f.v < f.min {
			return &worker.FieldError{Field: "--" + f.flag, Msg: fmt.Sprintf("%d is below the minimum %d", f.v, f.min)}
		}
	}
	if !strings.HasPrefix(c.Endpoint, "/") || strings.ContainsAny(c.Endpoint, "?# \t") {
		return &worker.FieldError{Field: "--" + FlagCheckEndpoint, Msg: fmt.Sprintf("%q is not a path starting with /", c.Endpoint)}
	}
	return nil
}

// Settings are the health settings in force for one worker: the flags merged with the worker's
// own health block.
type Settings struct {
	Interval         time.Duration
	Timeout          time.Duration
	FailureThreshold int
	SuccessThreshold int
	// Disabled means health checks are off for the worker: it counts ready and is not probed,
	// unless its connection mode probes even when disabled (ZMQ).
	Disabled      bool
	DrainSettle   time.Duration
	LLMProbeModel string
}

// Merge returns the settings of a worker of connection mode mode with overrides h (nil for
// none). The worker's fields win over the flags. An external provider is not probed unless its
// health block sets disable_health_check to false explicitly (Rolter).
func (c Config) Merge(mode string, h *worker.Health) Settings {
	if h == nil {
		h = &worker.Health{}
	}
	s := Settings{
		Interval:         secs(pick(h.CheckIntervalSecs, c.CheckIntervalSecs)),
		Timeout:          secs(pick(h.TimeoutSecs, c.TimeoutSecs)),
		FailureThreshold: pick(h.FailureThreshold, c.FailureThreshold),
		SuccessThreshold: pick(h.SuccessThreshold, c.SuccessThreshold),
		Disabled:         c.DisableHealthCheck || mode == worker.ModeExternal,
		DrainSettle:      secs(pick(h.DrainSettleSecs, c.DrainSettleSecs)),
	}
	if h.DisableHealthCheck != nil {
		s.Disabled = *h.DisableHealthCheck
	}
	if h.LLMProbeModel != nil {
		s.LLMProbeModel = strings.TrimSpace(*h.LLMProbeModel)
	}
	return s
}

func pick(p *int, def int) int {
	if p != nil {
		return *p
	}
	return def
}

func secs(n int) time.Duration { return time.Duration(n) * time.Second }
