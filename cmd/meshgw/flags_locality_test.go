package main

import (
	"strings"
	"testing"

	"github.com/meshgw/meshgw/gateway/locality"
)

// TestLocalityFlags: --locality-routing and --locality-overprovisioning-factor, their defaults,
// variables and bounds, and what reaches the gateway.
func TestLocalityFlags(t *testing.T) {
	def := locality.Config{Mode: "auto", Factor: 1.4}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		want    locality.Config
	}{
		{"the defaults", nil, nil, "", def},
		{"off", []string{"--locality-routing", "off"}, nil, "", locality.Config{Mode: "off", Factor: 1.4}},
		{"factor 1", []string{"--locality-overprovisioning-factor", "1"}, nil, "", locality.Config{Mode: "auto", Factor: 1}},
		{"factor 2.5", []string{"--locality-overprovisioning-factor=2.5"}, nil, "", locality.Config{Mode: "auto", Factor: 2.5}},
		{"from the variables", nil, map[string]string{"MESHGW_LOCALITY_ROUTING": "off", "MESHGW_LOCALITY_OVERPROVISIONING_FACTOR": "1.2"}, "",
			locality.Config{Mode: "off", Factor: 1.2}},
		{"a flag wins over its variable", []string{"--locality-routing", "auto"}, map[string]string{"MESHGW_LOCALITY_ROUTING": "off"}, "", def},
		{"unknown mode", []string{"--locality-routing", "on"}, nil, `--locality-routing "on" is not one of auto, off`, def},
		{"empty mode", []string{"--locality-routing="}, nil, `--locality-routing "" is not one of auto, off`, def},
		{"unknown mode from its variable", nil, map[string]string{"MESHGW_LOCALITY_ROUTING": "always"}, `$MESHGW_LOCALITY_ROUTING: --locality-routing "always" is not one of auto, off`, def},
		{"factor below 1", []string{"--locality-overprovisioning-factor", "0.9"}, nil, "--locality-overprovisioning-factor 0.9 is not a finite number of at least 1", def},
		{"factor 0", []string{"--locality-overprovisioning-factor", "0"}, nil, "--locality-overprovisioning-factor 0 is not a finite number of at least 1", def},
		{"negative factor", []string{"--locality-overprovisioning-factor", "-1.4"}, nil, "--locality-overprovisioning-factor -1.4 is not a finite number of at least 1", def},
		{"infinite factor", []string{"--locality-overprovisioning-factor", "+Inf"}, nil, `--locality-overprovisioning-factor "+Inf" is not a finite number`, def},
		{"NaN factor", []string{"--locality-overprovisioning-factor", "NaN"}, nil, `--locality-overprovisioning-factor "NaN" is not a finite number`, def},
		{"factor not a number", []string{"--locality-overprovisioning-factor", "high"}, nil, `--locality-overprovisioning-factor "high" is not a number`, def},
		{"factor from its variable, not a number", nil, map[string]string{"MESHGW_LOCALITY_OVERPROVISIONING_FACTOR": "x"}, "$MESHGW_LOCALITY_OVERPROVISIONING_FACTOR: ", def},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(tt.args, tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v, want one line starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := o.loc.config(); got != tt.want {
				t.Errorf("config %+v, want %+v", got, tt.want)
			}
			if err := o.loc.config().Validate(); err != nil {
				t.Errorf("the gateway refuses what the flags took: %v", err)
			}
		})
	}
}
