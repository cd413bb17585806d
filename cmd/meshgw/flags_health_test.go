package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/health"
)

func TestHealthAndBreakerFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		health  func(c *health.Config)
		breaker func(c *breaker.Config)
	}{
		{"defaults", nil, nil, nil, nil},
		{"flags", []string{"--health-check-interval-secs", "1", "--health-failure-threshold", "4", "--health-success-threshold", "1",
			"--health-check-timeout-secs", "2", "--health-check-endpoint", "/ready", "--disable-health-check", "--drain-settle-secs", "0",
			"--cb-failure-threshold", "2", "--cb-success-threshold", "1", "--cb-timeout-duration-secs", "5", "--cb-window-duration-secs", "9",
			"--disable-circuit-breaker"}, nil,
			func(c *health.Config) {
				c.CheckIntervalSecs, c.FailureThreshold, c.SuccessThreshold, c.TimeoutSecs = 1, 4, 1, 2
				c.Endpoint, c.DisableHealthCheck, c.DrainSettleSecs = "/ready", true, 0
			},
			func(c *breaker.Config) {
				c.FailureThreshold, c.SuccessThreshold, c.Timeout, c.Window, c.Disabled = 2, 1, 5*time.Second, 9*time.Second, true
			}},
		{"env", nil, map[string]string{"MESHGW_HEALTH_CHECK_INTERVAL_SECS": "7", "MESHGW_CB_FAILURE_THRESHOLD": "4",
			"MESHGW_DISABLE_CIRCUIT_BREAKER": "true", "MESHGW_REMOVE_UNHEALTHY_WORKERS": "1"},
			func(c *health.Config) { c.CheckIntervalSecs, c.RemoveUnhealthyWorkers = 7, true },
			func(c *breaker.Config) { c.FailureThreshold, c.Disabled = 4, true }},
		{"remove unhealthy", []string{"--remove-unhealthy-workers"}, nil,
			func(c *health.Config) { c.RemoveUnhealthyWorkers = true }, nil},
		{"alias", []string{"--worker-auto-recovery"}, nil,
			func(c *health.Config) { c.RemoveUnhealthyWorkers = true }, nil},
		{"alias =false", []string{"--worker-auto-recovery=false"}, map[string]string{"MESHGW_REMOVE_UNHEALTHY_WORKERS": "true"}, nil, nil},
		{"alias from env", nil, map[string]string{"MESHGW_WORKER_AUTO_RECOVERY": "true"},
			func(c *health.Config) { c.RemoveUnhealthyWorkers = true }, nil},
		{"flag wins over the alias's env", []string{"--remove-unhealthy-workers"}, map[string]string{"MESHGW_WORKER_AUTO_RECOVERY": "false"},
			func(c *health.Config) { c.RemoveUnhealthyWorkers = true }, nil},
		{"one name given twice: the last wins", []string{"--remove-unhealthy-workers", "--remove-unhealthy-workers=false"}, nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			wantH, wantB := health.DefaultConfig(), breaker.DefaultConfig()
			if tt.health != nil {
				tt.health(&wantH)
			}
			if tt.breaker != nil {
				tt.breaker(&wantB)
			}
			if diff := cmp.Diff(wantH, o.health.cfg); diff != "" {
				t.Errorf("health config (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantB, o.breaker.config()); diff != "" {
				t.Errorf("breaker config (-want +got):\n%s", diff)
			}
		})
	}
}

// A bad health or breaker value exits 2 with one line naming the flag.
func TestBadHealthAndBreakerFlagsExitTwo(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--health-check-interval-secs", "0"}, nil, "--health-check-interval-secs 0 is below the minimum 1"},
		{[]string{"--health-failure-threshold", "0"}, nil, "--health-failure-threshold 0 is below the minimum 1"},
		{[]string{"--health-success-threshold", "-1"}, nil, "--health-success-threshold -1 is below the minimum 1"},
		{[]string{"--health-check-timeout-secs", "0"}, nil, "--health-check-timeout-secs 0 is below the minimum 1"},
		{[]string{"--drain-settle-secs", "-1"}, nil, "--drain-settle-secs -1 is below the minimum 0"},
		{[]string{"--health-check-endpoint", "health"}, nil, "--health-check-endpoint"},
		{[]string{"--cb-failure-threshold", "0"}, nil, "--cb-failure-threshold 0 is below the minimum 1"},
		{[]string{"--cb-success-threshold", "0"}, nil, "--cb-success-threshold 0 is below the minimum 1"},
		{[]string{"--cb-timeout-duration-secs", "0"}, nil, "--cb-timeout-duration-secs 0 is below the minimum 1"},
		{[]string{"--cb-window-duration-secs", "0"}, nil, "--cb-window-duration-secs 0 is below the minimum 1"},
		{[]string{"--cb-timeout-duration-secs", "99999999999"}, nil, "--cb-timeout-duration-secs 99999999999 is above the maximum"},
		{nil, map[string]string{"MESHGW_CB_FAILURE_THRESHOLD": "-3"}, "--cb-failure-threshold -3 is below the minimum 1"},
		{[]string{"--worker-auto-recovery=maybe"}, nil, "worker-auto-recovery"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, env(tt.env), &stdout, &stderr)
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and one line with %q", code, stderr.String(), tt.want)
			}
		})
	}
}
