package worker

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Connection modes of a worker.
const (
	ModeHTTP     = "http"
	ModeGRPC     = "grpc"
	ModeZMQ      = "zmq"
	ModeExternal = "external"
)

// Providers an external worker may name.
var providers = []string{"openai", "openai_compatible", "anthropic", "azure_openai", "gemini"}

// Defaults of a spec's routing metadata.
const (
	DefaultPriority = 50
	DefaultCost     = 1.0
)

// Spec is a worker as an operator registers it (DESIGN.md section 2). Optional numbers are
// pointers so that "not set" differs from zero; Normalize fills the defaults that are part of the
// spec's identity.
type Spec struct {
	URL            string            `json:"url"`
	ConnectionMode string            `json:"connection_mode,omitempty"`
	Provider       string            `json:"provider,omitempty"`
	Model          string            `json:"model,omitempty"`
	Models         []string          `json:"models,omitempty"`
	Capabilities   []string          `json:"capabilities,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Priority       *int              `json:"priority,omitempty"`
	Cost           *float64          `json:"cost,omitempty"`
	Region         string            `json:"region,omitempty"`
	// APIKey is input only: never returned, logged, gossiped or exported. It is decoded from
	// JSON (registration) but a Spec must never be encoded back to a client: answers use their
	// own record types, and Redacted returns a copy without it.
	APIKey string `json:"api_key,omitempty"`
	// DPRank is the data-parallel rank, appended to the id as "@RANK"; nil for none.
	DPRank     *int        `json:"dp_rank,omitempty"`
	Health     *Health     `json:"health,omitempty"`
	Resilience *Resilience `json:"resilience,omitempty"`
}

// Health holds per-worker overrides of the health-check flags; nil fields use the flag.
type Health struct {
	CheckIntervalSecs  *int    `json:"check_interval_secs,omitempty"`
	TimeoutSecs        *int    `json:"timeout_secs,omitempty"`
	FailureThreshold   *int    `json:"failure_threshold,omitempty"`
	SuccessThreshold   *int    `json:"success_threshold,omitempty"`
	DisableHealthCheck *bool   `json:"disable_health_check,omitempty"`
	DrainSettleSecs    *int    `json:"drain_settle_secs,omitempty"`
	LLMProbeModel      *string `json:"llm_probe_model,omitempty"`
}

// Resilience holds per-worker overrides of the breaker and retry flags; nil fields use the flag.
// A status list the user sets replaces the default; it does not add to it.
//
// Both status lists only classify the worker's answers for its circuit breaker (breaker.
// Classifier): a status in RetryableStatusCodes and not in CapacityStatusCodes is a failure.
// Despite its name, RetryableStatusCodes does not change what the gateway retries, as in SMG:
// every worker's 408, 429, 500, 502, 503 and 504 are retried; MaxRetries and DisableRetry
// narrow the retries of a worker.
type Resilience struct {
	CapacityStatusCodes  []int `json:"capacity_status_codes,omitempty"`
	RetryableStatusCodes []int `json:"retryable_status_codes,omitempty"`
	CBFailureThreshold   *int  `json:"cb_failure_threshold,omitempty"`
	CBSuccessThreshold   *int  `json:"cb_success_threshold,omitempty"`
	CBTimeoutSecs        *int  `json:"cb_timeout_secs,omitempty"`
	MaxRetries           *int  `json:"max_retries,omitempty"`
	DisableRetry         *bool `json:"disable_retry,omitempty"`
}

// FieldError is a validation error that names the offending field, so that the admin API can
// answer 400 naming it and the command line can exit 2 naming it.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Normalize validates s and puts it in canonical form in place: the URL canonicalized, the
// connection mode inferred from the scheme when empty, the model list merged and deduplicated,
// capability names lower-cased and sorted in bit order. It returns a *FieldError naming the first
// bad field. Normalize is idempotent.
func (s *Spec) Normalize() error {
	if err := s.checkUTF8(); err != nil {
		return err
	}
	if s.ConnectionMode == "" {
		s.ConnectionMode = modeFromURL(s.URL)
	}
	s.ConnectionMode = strings.ToLower(s.ConnectionMode)
	switch s.ConnectionMode {
	case ModeHTTP, ModeGRPC, ModeZMQ, ModeExternal:
	default:
		return fieldErr("connection_mode", "%q is not one of http, grpc, zmq, external", s.ConnectionMode)
	}
	canon, err := CanonicalURL(s.URL, s.ConnectionMode == ModeExternal)
	if err != nil {
		return fieldErr("url", "%v", err)
	}
	if err := checkScheme(s.ConnectionMode, canon); err != nil {
		return err
	}
	s.URL = canon
	if s.ConnectionMode == ModeExternal {
		s.Provider = strings.ToLower(s.Provider)
		if s.Provider == "" {
			s.Provider = "openai_compatible"
		}
		if !slices.Contains(providers, s.Provider) {
			return fieldErr("provider", "%q is not one of %s", s.Provider, strings.Join(providers, ", "))
		}
	} else if s.Provider != "" {
		return fieldErr("provider", "only external workers name a provider")
	}
	s.Models = s.ModelList()
	s.Model = ""
	if len(s.Capabilities) > 0 {
		c, err := ParseCapabilities(s.Capabilities)
		if err != nil {
			return fieldErr("capabilities", "%v", err)
		}
		s.Capabilities = c.Names()
	}
	if s.Priority != nil && (*s.Priority < 0 || *s.Priority > 1000) {
		return fieldErr("priority", "%d is out of range 0-1000", *s.Priority)
	}
	if s.Cost != nil && (*s.Cost < 0 || *s.Cost != *s.Cost) {
		return fieldErr("cost", "must be a number >= 0")
	}
	if s.DPRank != nil && *s.DPRank < 0 {
		return fieldErr("dp_rank", "must be >= 0")
	}
	for k := range s.Labels {
		if k == "" {
			return fieldErr("labels", "a label key is empty")
		}
	}
	if err := s.Health.validate(); err != nil {
		return err
	}
	return s.Resilience.validate()
}

// checkUTF8 refuses a string field that is not valid UTF-8: records travel in protobuf strings
// (bulletins, forwarded writes), which must be.
func (s *Spec) checkUTF8() error {
	fields := []struct {
		name string
		v    []string
	}{
		{"url", []string{s.URL}},
		{"connection_mode", []string{s.ConnectionMode}},
		{"provider", []string{s.Provider}},
		{"model", []string{s.Model}},
		{"models", s.Models},
		{"capabilities", s.Capabilities},
		{"region", []string{s.Region}},
		{"api_key", []string{s.APIKey}},
	}
	if s.Health != nil && s.Health.LLMProbeModel != nil {
		fields = append(fields, struct {
			name string
			v    []string
		}{"health.llm_probe_model", []string{*s.Health.LLMProbeModel}})
	}
	for _, f := range fields {
		for _, v := range f.v {
			if !utf8.ValidString(v) {
				return fieldErr(f.name, "not valid UTF-8")
			}
		}
	}
	for k, v := range s.Labels {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fieldErr("labels", "a key or value is not valid UTF-8")
		}
	}
	return nil
}

func modeFromURL(u string) string {
	scheme, _, _ := strings.Cut(strings.TrimSpace(u), "://")
	switch strings.ToLower(scheme) {
	case "grpc":
		return ModeGRPC
	case "ipc", "tcp":
		return ModeZMQ
	}
	return ModeHTTP
}

func checkScheme(mode, canon string) error {
	scheme, _, _ := strings.Cut(canon, "://")
	ok := map[string][]string{
		ModeHTTP:     {"http", "https"},
		ModeGRPC:     {"grpc"},
		ModeZMQ:      {"ipc", "tcp"},
		ModeExternal: {"http", "https"},
	}[mode]
	if !slices.Contains(ok, scheme) {
		return fieldErr("url", "scheme %s:// does not fit connection_mode %s (want %s)", scheme, mode, strings.Join(ok, " or "))
	}
	return nil
}

func (h *Health) validate() error {
	if h == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		v    *int
		min  int
	}{
		{"health.check_interval_secs", h.CheckIntervalSecs, 1},
		{"health.timeout_secs", h.TimeoutSecs, 1},
		{"health.failure_threshold", h.FailureThreshold, 1},
		{"health.success_threshold", h.SuccessThreshold, 1},
		{"health.drain_settle_secs", h.DrainSettleSecs, 0},
	} {
		if f.v != nil && *f.v < f.min {
			return fieldErr(f.name, "%d is below the minimum %d", *f.v, f.min)
		}
	}
	return nil
}

func (r *Resilience) validate() error {
	if r == nil {
		return nil
	}
	for _, f := range []struct {
		name  string
		codes []int
	}{{"resilience.capacity_status_codes", r.CapacityStatusCodes}, {"resilience.retryable_status_codes", r.RetryableStatusCodes}} {
		for _, c := range f.codes {
			if c < 100 || c > 599 {
				return fieldErr(f.name, "%d is not an HTTP status code", c)
			}
		}
	}
	for _, f := range []struct {
		name string
		v    *int
		min  int
	}{
		{"resilience.cb_failure_threshold", r.CBFailureThreshold, 1},
		{"resilience.cb_success_threshold", r.CBSuccessThreshold, 1},
		{"resilience.cb_timeout_secs", r.CBTimeoutSecs, 1},
		{"resilience.max_retries", r.MaxRetries, 1},
	} {
		if f.v != nil && *f.v < f.min {
			return fieldErr(f.name, "%d is below the minimum %d", *f.v, f.min)
		}
	}
	return nil
}

// ModelList returns the models served, merging Model and Models without duplicates; empty means
// any model.
func (s *Spec) ModelList() []string {
	var out []string
	for _, m := range append([]string{s.Model}, s.Models...) {
		m = strings.TrimSpace(m)
		if m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// Caps returns the declared capabilities, CapAll when none are declared. Call it on a
// normalized spec.
func (s *Spec) Caps() Capability {
	c, _ := ParseCapabilities(s.Capabilities)
	if c == 0 {
		return CapAll
	}
	return c
}

// ID returns the worker's id. Call it on a normalized spec.
func (s *Spec) ID() ID {
	rank := -1
	if s.DPRank != nil {
		rank = *s.DPRank
	}
	return NewID(s.URL, rank)
}

// DisplayID returns host:port of the worker's URL.
func (s *Spec) DisplayID() string { return DisplayID(s.URL) }

// PriorityOrDefault returns the priority, 50 when unset.
func (s *Spec) PriorityOrDefault() int {
	if s.Priority == nil {
		return DefaultPriority
	}
	return *s.Priority
}

// CostOrDefault returns the cost, 1.0 when unset.
func (s *Spec) CostOrDefault() float64 {
	if s.Cost == nil {
		return DefaultCost
	}
	return *s.Cost
}

// Redacted returns a deep copy of s without its API key, safe to return, log or gossip.
func (s *Spec) Redacted() Spec {
	c := s.Clone()
	c.APIKey = ""
	return c
}

// HasAPIKey reports whether an API key is set, without revealing it.
func (s *Spec) HasAPIKey() bool { return s.APIKey != "" }

// HostLocal reports whether the worker is reachable only from its own host: a ZMQ engine on an
// ipc:// socket. Such a worker is never published, imported or failed over (DESIGN.md section 4).
func (s *Spec) HostLocal() bool { return IsHostLocalURL(s.URL) }

// IsHostLocalURL is HostLocal for a canonical URL.
func IsHostLocalURL(url string) bool { return strings.HasPrefix(url, "ipc://") }
