package health

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/meshgw/meshgw/worker"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name     string
		mut      func(*Config)
		wantFlag string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"interval_zero", func(c *Config) { c.CheckIntervalSecs = 0 }, "--health-check-interval-secs"},
		{"failure_zero", func(c *Config) { c.FailureThreshold = 0 }, "--health-failure-threshold"},
		{"success_negative", func(c *Config) { c.SuccessThreshold = -1 }, "--health-success-threshold"},
		{"timeout_zero", func(c *Config) { c.TimeoutSecs = 0 }, "--health-check-timeout-secs"},
		{"settle_negative", func(c *Config) { c.DrainSettleSecs = -1 }, "--drain-settle-secs"},
		{"settle_zero_ok", func(c *Config) { c.DrainSettleSecs = 0 }, ""},
		{"endpoint_no_slash", func(c *Config) { c.Endpoint = "health" }, "--health-check-endpoint"},
		{"endpoint_query", func(c *Config) { c.Endpoint = "/health?x=1" }, "--health-check-endpoint"},
		{"endpoint_other", func(c *Config) { c.Endpoint = "/healthz" }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mut(&c)
			err := c.Validate()
			if tc.wantFlag == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			var fe *worker.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.wantFlag {
				t.Fatalf("Validate() = %v, want a FieldError naming %s", err, tc.wantFlag)
			}
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	want := Config{CheckIntervalSecs: 60, FailureThreshold: 3, SuccessThreshold: 2, TimeoutSecs: 5,
		Endpoint: "/health", DrainSettleSecs: 5}
	if diff := cmp.Diff(want, DefaultConfig()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestMerge(t *testing.T) {
	def := DefaultConfig()
	off := DefaultConfig()
	off.DisableHealthCheck = true
	base := Settings{Interval: time.Minute, Timeout: 5 * time.Second, FailureThreshold: 3, SuccessThreshold: 2, DrainSettle: 5 * time.Second}
	with := func(f func(*Settings)) Settings { s := base; f(&s); return s }
	tests := []struct {
		name string
		cfg  Config
		mode string
		h    *worker.Health
		want Settings
	}{
		{"flags_only", def, worker.ModeHTTP, nil, base},
		{"worker_wins", def, worker.ModeGRPC, &worker.Health{CheckIntervalSecs: ptr(7), TimeoutSecs: ptr(2),
			FailureThreshold: ptr(4), SuccessThreshold: ptr(1), DrainSettleSecs: ptr(0)},
			Settings{Interval: 7 * time.Second, Timeout: 2 * time.Second, FailureThreshold: 4, SuccessThreshold: 1}},
		{"flag_disables", off, worker.ModeHTTP, nil, with(func(s *Settings) { s.Disabled = true })},
		{"worker_enables_over_flag", off, worker.ModeHTTP, &worker.Health{DisableHealthCheck: ptr(false)}, base},
		{"worker_disables", def, worker.ModeHTTP, &worker.Health{DisableHealthCheck: ptr(true)}, with(func(s *Settings) { s.Disabled = true })},
		{"external_off_by_default", def, worker.ModeExternal, &worker.Health{}, with(func(s *Settings) { s.Disabled = true })},
		{"external_on_explicitly", off, worker.ModeExternal, &worker.Health{DisableHealthCheck: ptr(false), LLMProbeModel: ptr(" gpt-4o-mini ")},
			with(func(s *Settings) { s.LLMProbeModel = "gpt-4o-mini" })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.cfg.Merge(tc.mode, tc.h)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
