package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/gateway/policy"
)

// TestCacheAwareFlags: SMG's cache_aware flags, their defaults, aliases and bounds, and what
// reaches the policy.
func TestCacheAwareFlags(t *testing.T) {
	smg := policy.CacheAwareConfig{Rule: "cost", LoadCost: 256, LoadSlack: 2, CacheThreshold: 0.3, BalanceAbsThreshold: 64, BalanceRelThreshold: 1.5,
		MaxTreeSize: 67108864, EvictionInterval: 120 * time.Second}
	with := func(f func(c *policy.CacheAwareConfig)) policy.CacheAwareConfig {
		c := smg
		f(&c)
		return c
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		want    policy.CacheAwareConfig
	}{
		{"the defaults", []string{"--policy", "cache_aware"}, nil, "", smg},
		{"SMG's rule", []string{"--cache-rule", "smg"}, nil, "", with(func(c *policy.CacheAwareConfig) { c.Rule = "smg" })},
		{"a load cost", []string{"--cache-load-cost", "512.5"}, nil, "", with(func(c *policy.CacheAwareConfig) { c.LoadCost = 512.5 })},
		{"load cost 0 means 0", []string{"--cache-load-cost", "0"}, nil, "", with(func(c *policy.CacheAwareConfig) { c.LoadCost = -1 })},
		{"a load slack", []string{"--cache-load-slack", "5"}, nil, "", with(func(c *policy.CacheAwareConfig) { c.LoadSlack = 5 })},
		{"load slack 0 means 0", []string{"--cache-load-slack", "0"}, nil, "", with(func(c *policy.CacheAwareConfig) { c.LoadSlack = -1 })},
		{"negative load slack", []string{"--cache-load-slack", "-1"}, nil, "--cache-load-slack -1 is below the minimum 0", smg},
		{"unknown rule", []string{"--cache-rule", "dynamo"}, nil, `--cache-rule "dynamo" is not one of cost, smg`, smg},
		{"negative load cost", []string{"--cache-load-cost", "-1"}, nil, "--cache-load-cost -1 is below the minimum 0", smg},
		{"SMG's command line", []string{"--policy", "cache_aware", "--cache-rule", "smg", "--cache-threshold", "0.5", "--balance-abs-threshold", "32",
			"--balance-rel-threshold", "1.2", "--eviction-interval", "60", "--max-tree-size", "1000000"}, nil, "",
			policy.CacheAwareConfig{Rule: "smg", LoadCost: 256, LoadSlack: 2, CacheThreshold: 0.5, BalanceAbsThreshold: 32, BalanceRelThreshold: 1.2, MaxTreeSize: 1000000, EvictionInterval: time.Minute}},
		{"alias --cache-match-threshold", []string{"--cache-match-threshold", "0.6"}, nil, "", with(func(c *policy.CacheAwareConfig) { c.CacheThreshold = 0.6 })},
		{"alias --eviction-interval-secs", []string{"--eviction-interval-secs", "30"}, nil, "", with(func(c *policy.CacheAwareConfig) { c.EvictionInterval = 30 * time.Second })},
		{"alias from its variable", nil, map[string]string{"MESHGW_EVICTION_INTERVAL_SECS": "45"}, "", with(func(c *policy.CacheAwareConfig) { c.EvictionInterval = 45 * time.Second })},
		{"a flag wins over its alias's variable", []string{"--cache-threshold", "0.4"}, map[string]string{"MESHGW_CACHE_MATCH_THRESHOLD": "0.9"}, "",
			with(func(c *policy.CacheAwareConfig) { c.CacheThreshold = 0.4 })},
		{"aliases that agree", []string{"--cache-threshold", "0.40", "--cache-match-threshold", "0.4"}, nil, "", with(func(c *policy.CacheAwareConfig) { c.CacheThreshold = 0.4 })},
		{"zeros mean zero, not the default", []string{"--cache-threshold", "0", "--balance-abs-threshold", "0", "--balance-rel-threshold", "0", "--eviction-interval", "0"}, nil, "",
			with(func(c *policy.CacheAwareConfig) {
				c.CacheThreshold, c.BalanceAbsThreshold, c.BalanceRelThreshold, c.EvictionInterval = -1, -1, -1, -1
			})},
		{"aliases that contradict", []string{"--cache-threshold", "0.4", "--cache-match-threshold", "0.5"}, nil,
			"--cache-threshold=0.4 and --cache-match-threshold=0.5 contradict each other (one is an alias of the other); give one of them", smg},
		{"interval aliases that contradict", []string{"--eviction-interval-secs", "10", "--eviction-interval", "20"}, nil,
			"--eviction-interval-secs=10 and --eviction-interval=20 contradict each other", smg},
		{"threshold above 1", []string{"--cache-threshold", "1.5"}, nil, "--cache-threshold 1.5 is not in 0-1", smg},
		{"threshold not a number", []string{"--cache-match-threshold", "high"}, nil, `--cache-match-threshold "high" is not a number`, smg},
		{"negative abs threshold", []string{"--balance-abs-threshold", "-1"}, nil, "--balance-abs-threshold -1 is below the minimum 0", smg},
		{"negative rel threshold", []string{"--balance-rel-threshold", "-0.5"}, nil, "--balance-rel-threshold -0.5 is below the minimum 0", smg},
		{"empty tree", []string{"--max-tree-size", "0"}, nil, "--max-tree-size 0 is below the minimum 1", smg},
		{"negative interval", []string{"--eviction-interval", "-5"}, nil, "--eviction-interval -5 is below the minimum 0", smg},
		{"interval not a whole number", []string{"--eviction-interval-secs", "1.5"}, nil, `--eviction-interval-secs "1.5" is not a whole number`, smg},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(tt.args, tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := o.cache.config(); got != tt.want {
				t.Errorf("config %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestSMGRuleFlagsSayTheirRule: --help says that the thresholds of SMG's rule apply only with
// --cache-rule smg, as the cost rule's flags say theirs (the default rule, cost, ignores them).
func TestSMGRuleFlagsSayTheirRule(t *testing.T) {
	var stdout bytes.Buffer
	if code := run([]string{"--help"}, env(nil), &stdout, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(stdout.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "--") {
			lines[f[0]] = l
		}
	}
	for flag, rule := range map[string]string{"--cache-threshold": "smg", "--cache-match-threshold": "smg", "--balance-abs-threshold": "smg",
		"--balance-rel-threshold": "smg", "--cache-load-cost": "cost", "--cache-load-slack": "cost"} {
		if l := lines[flag]; !strings.Contains(l, "with --cache-rule "+rule) {
			t.Errorf("help of %s does not say it applies with --cache-rule %s: %q", flag, rule, l)
		}
	}
}

// TestOtherRulesFlagsWarn: a flag of the cache rule not in force, given on the command line or
// through its variable, under any of its names, is named in one WARN line at start. The start
// here fails at once (the data plane's port is taken), after the flags are judged.
func TestOtherRulesFlagsWarn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := []string{"--host", "127.0.0.1", "--port", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string // the WARN line's message; "" for none
	}{
		{"the alias under the default rule", []string{"--cache-match-threshold", "0.5"}, nil,
			`msg="--cache-match-threshold takes effect only with --cache-rule smg; --cache-rule is cost, which ignores it"`},
		{"a variable and a flag", []string{"--balance-rel-threshold", "2"}, map[string]string{"MESHGW_BALANCE_ABS_THRESHOLD": "32"},
			`msg="$MESHGW_BALANCE_ABS_THRESHOLD, --balance-rel-threshold take effect only with --cache-rule smg; --cache-rule is cost, which ignores them"`},
		{"the rule given as cost", []string{"--cache-rule", "cost", "--cache-threshold", "0.5"}, nil,
			`msg="--cache-threshold takes effect only with --cache-rule smg; --cache-rule is cost, which ignores it"`},
		{"the cost rule's flag under smg", []string{"--cache-rule", "smg", "--cache-load-cost", "100"}, nil,
			`msg="--cache-load-cost takes effect only with --cache-rule cost; --cache-rule is smg, which ignores it"`},
		{"under smg", []string{"--cache-rule", "smg", "--cache-threshold", "0.5", "--balance-abs-threshold", "32"}, nil, ""},
		{"another policy", []string{"--policy", "round_robin", "--cache-threshold", "0.5"}, nil, ""},
		{"the defaults", nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := runContext(context.Background(), append(taken, tt.args...), env(tt.env), io.Discard, &stderr); code != 1 {
				t.Fatalf("exit %d, want 1 (the port is taken): %s", code, stderr.String())
			}
			var warns []string
			for _, l := range strings.Split(stderr.String(), "\n") {
				if strings.Contains(l, "level=WARN") && strings.Contains(l, "--cache-rule") {
					warns = append(warns, l)
				}
			}
			switch {
			case tt.want == "" && len(warns) > 0:
				t.Errorf("warned %q", warns)
			case tt.want != "" && (len(warns) != 1 || !strings.Contains(warns[0], tt.want)):
				t.Errorf("warned %q, want one line with %s", warns, tt.want)
			}
		})
	}
}
