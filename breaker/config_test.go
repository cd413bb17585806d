package breaker

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/worker"
)

func TestDefaultConfig(t *testing.T) {
	want := Config{FailureThreshold: 10, SuccessThreshold: 3, Timeout: 60 * time.Second, Window: 120 * time.Second}
	if diff := cmp.Diff(want, DefaultConfig()); diff != "" {
		t.Fatalf("DefaultConfig (-want +got):\n%s", diff)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"failure threshold zero", func(c *Config) { c.FailureThreshold = 0 }, "--cb-failure-threshold must be >= 1, got 0"},
		{"success threshold negative", func(c *Config) { c.SuccessThreshold = -2 }, "--cb-success-threshold must be >= 1, got -2"},
		{"timeout zero", func(c *Config) { c.Timeout = 0 }, "--cb-timeout-duration-secs must be > 0, got 0"},
		{"window negative", func(c *Config) { c.Window = -5 * time.Second }, "--cb-window-duration-secs must be > 0, got -5"},
		{"disabled still validates the threshold", func(c *Config) { c.Disabled, c.FailureThreshold = true, 0 }, "--cb-failure-threshold must be >= 1, got 0"},
		{"thresholds of one are fine", func(c *Config) { c.FailureThreshold, c.SuccessThreshold = 1, 1 }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			got := ""
			if err := c.Validate(); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Fatalf("Validate() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEffectiveFailureThreshold(t *testing.T) {
	c := DefaultConfig()
	if got := c.EffectiveFailureThreshold(); got != 10 {
		t.Errorf("enabled: %d, want 10", got)
	}
	c.Disabled = true
	if got := c.EffectiveFailureThreshold(); got != MaxThreshold {
		t.Errorf("disabled: %d, want MaxThreshold", got)
	}
}

func TestResolve(t *testing.T) {
	ptr := func(v int) *int { return &v }
	flags := DefaultConfig()
	disabled := flags
	disabled.Disabled = true
	tests := []struct {
		name          string
		flags         Config
		r             *worker.Resilience
		want          Config
		wantCapacity  []int
		wantRetryable []int
	}{
		{"no overrides", flags, nil, flags, []int{429}, []int{408, 429, 500, 502, 503, 504}},
		{"empty overrides", flags, &worker.Resilience{}, flags, []int{429}, []int{408, 429, 500, 502, 503, 504}},
		{
			"every override",
			flags,
			&worker.Resilience{
				CBFailureThreshold: ptr(4), CBSuccessThreshold: ptr(5), CBTimeoutSecs: ptr(7),
				CapacityStatusCodes: []int{503}, RetryableStatusCodes: []int{502, 503},
			},
			Config{FailureThreshold: 4, SuccessThreshold: 5, Timeout: 7 * time.Second, Window: flags.Window},
			[]int{503},
			[]int{502, 503},
		},
		{
			"a user list replaces the default, the other list keeps it",
			flags,
			&worker.Resilience{RetryableStatusCodes: []int{500}},
			flags,
			[]int{429},
			[]int{500},
		},
		{"disabled flags stay disabled", disabled, &worker.Resilience{CBSuccessThreshold: ptr(1)},
			Config{FailureThreshold: 10, SuccessThreshold: 1, Timeout: flags.Timeout, Window: flags.Window, Disabled: true},
			[]int{429}, []int{408, 429, 500, 502, 503, 504}},
		{"a worker's threshold beats --disable-circuit-breaker", disabled, &worker.Resilience{CBFailureThreshold: ptr(2)},
			Config{FailureThreshold: 2, SuccessThreshold: 3, Timeout: flags.Timeout, Window: flags.Window},
			[]int{429}, []int{408, 429, 500, 502, 503, 504}},
		{"overrides below the minimum are skipped", flags,
			&worker.Resilience{CBFailureThreshold: ptr(0), CBSuccessThreshold: ptr(-1), CBTimeoutSecs: ptr(0)},
			flags, []int{429}, []int{408, 429, 500, 502, 503, 504}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cl := Resolve(tt.flags, tt.r)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("resolved config invalid: %v", err)
			}
			if diff := cmp.Diff(tt.wantCapacity, cl.CapacityStatusCodes()); diff != "" {
				t.Errorf("capacity (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRetryable, cl.RetryableStatusCodes()); diff != "" {
				t.Errorf("retryable (-want +got):\n%s", diff)
			}
		})
	}
}

// The override that replaces the default list changes what the breaker counts: with
// capacity [503], a 503 no longer trips the circuit and a 429 (now on neither list but still
// retryable) is a failure.
func TestResolvedClassifierDrivesBreaker(t *testing.T) {
	cfg, cl := Resolve(testConfig(), &worker.Resilience{CapacityStatusCodes: []int{503}})
	f := newFixture(t, cfg)
	for range 5 {
		f.b.Record(cl.Classify(503))
	}
	f.wantSnap(t, Closed, 0, 0)
	for range 3 {
		f.b.Record(cl.Classify(429))
	}
	f.wantSnap(t, Open, 3, 0)
}
