package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/discovery/kube"
)

// TestDiscoveryFlags: SMG's discovery flags in SMG's forms, their defaults and variables, what
// reaches the server, and a one-line error for each bad value.
func TestDiscoveryFlags(t *testing.T) {
	app := map[string]string{"app": "sglang"}
	tests := []struct {
		name        string
		args        []string
		env         map[string]string
		wantErr     string
		want        *kube.Config
		wantRemoval bool
	}{
		{"off by default", nil, nil, "", nil, false},
		{"SMG's form", []string{"--service-discovery", "--selector", "app=sglang"}, nil, "",
			&kube.Config{Selector: app, Rules: kube.Rules{Port: 80}}, true},
		{"space-separated pairs after one flag", []string{"--service-discovery", "--selector", "app=sglang", "tier=gpu", "--service-discovery-port", "8000"}, nil, "",
			&kube.Config{Selector: map[string]string{"app": "sglang", "tier": "gpu"}, Rules: kube.Rules{Port: 8000}}, true},
		{"repeated", []string{"--service-discovery", "--selector=app=sglang", "--selector", "tier=gpu"}, nil, "",
			&kube.Config{Selector: map[string]string{"app": "sglang", "tier": "gpu"}, Rules: kube.Rules{Port: 80}}, true},
		{"one value with spaces", []string{"--service-discovery", "--selector", "app=sglang tier=gpu"}, nil, "",
			&kube.Config{Selector: map[string]string{"app": "sglang", "tier": "gpu"}, Rules: kube.Rules{Port: 80}}, true},
		{"every flag", []string{"--service-discovery", "--selector", "app=sglang", "--service-discovery-namespace", "llm", "--model-id-source", "label:model", "--service-discovery-port", "30000"}, nil, "",
			&kube.Config{Selector: app, Namespace: "llm", Rules: kube.Rules{Port: 30000, ModelID: kube.ModelIDSource{Kind: "label", Key: "model"}}}, true},
		{"from the variables", nil, map[string]string{"MESHGW_SERVICE_DISCOVERY": "true", "MESHGW_SELECTOR": "app=sglang tier=gpu", "MESHGW_MODEL_ID_SOURCE": "namespace"}, "",
			&kube.Config{Selector: map[string]string{"app": "sglang", "tier": "gpu"}, Rules: kube.Rules{Port: 80, ModelID: kube.ModelIDSource{Kind: "namespace"}}}, true},
		{"removal kept off when given", []string{"--service-discovery", "--selector", "app=sglang", "--remove-unhealthy-workers=false"}, nil, "",
			&kube.Config{Selector: app, Rules: kube.Rules{Port: 80}}, false},
		{"removal kept off through the alias", []string{"--service-discovery", "--selector", "app=sglang", "--worker-auto-recovery=false"}, nil, "",
			&kube.Config{Selector: app, Rules: kube.Rules{Port: 80}}, false},
		{"router selector", []string{"--router-selector", "app=meshgw", "--bootstrap-expect", "3", "--mesh-advertise-host", "10.0.0.1", "--insecure"}, nil, "",
			&kube.Config{RouterSelector: map[string]string{"app": "meshgw"}}, false},
		{"router selector in a namespace", []string{"--router-selector", "app=meshgw", "--bootstrap-expect", "3", "--service-discovery-namespace", "gw", "--mesh-advertise-host", "10.0.0.1", "--insecure"}, nil, "",
			&kube.Config{RouterSelector: map[string]string{"app": "meshgw"}, Namespace: "gw"}, false},
		{"router selector with discovery", []string{"--router-selector", "app=meshgw", "--bootstrap-expect", "3", "--service-discovery", "--selector", "app=sglang", "--mesh-advertise-host", "10.0.0.1", "--insecure"}, nil, "",
			&kube.Config{RouterSelector: map[string]string{"app": "meshgw"}, Selector: app, Rules: kube.Rules{Port: 80}}, true},
		{"router selector without bootstrap-expect", []string{"--router-selector", "app=meshgw"}, nil, "--router-selector needs --bootstrap-expect N", nil, false},
		{"no selector", []string{"--service-discovery"}, nil, "--service-discovery needs --selector key=value", nil, false},
		{"selector without discovery", []string{"--selector", "app=sglang"}, nil, "--selector needs --service-discovery", nil, false},
		{"namespace without discovery", []string{"--service-discovery-namespace", "llm"}, nil, "--service-discovery-namespace needs --service-discovery", nil, false},
		{"model id source without discovery", []string{"--model-id-source", "namespace"}, nil, "--model-id-source needs --service-discovery", nil, false},
		{"selector not key=value", []string{"--service-discovery", "--selector", "sglang"}, nil, `--selector "sglang": "sglang" is not key=value`, nil, false},
		{"selector with a bad key", []string{"--service-discovery", "--selector", "a/b/c=x"}, nil, `--selector "a/b/c=x": label key "a/b/c"`, nil, false},
		{"selector contradicting itself", []string{"--service-discovery", "--selector", "app=a", "app=b"}, nil, `--selector "app=a app=b": label key "app" is given twice`, nil, false},
		{"port 0", []string{"--service-discovery", "--selector", "app=x", "--service-discovery-port", "0"}, nil, "--service-discovery-port 0 is not a port; want 1-65535", nil, false},
		{"port too big", []string{"--service-discovery", "--selector", "app=x", "--service-discovery-port", "65536"}, nil, "--service-discovery-port 65536 is not a port", nil, false},
		{"port not a number", []string{"--service-discovery", "--selector", "app=x", "--service-discovery-port", "http"}, nil, `--service-discovery-port "http" is not a whole number`, nil, false},
		{"bad namespace", []string{"--service-discovery", "--selector", "app=x", "--service-discovery-namespace", "LLM_ns"}, nil, `--service-discovery-namespace "LLM_ns": not a namespace name`, nil, false},
		{"bad model id source", []string{"--service-discovery", "--selector", "app=x", "--model-id-source", "pod"}, nil, `--model-id-source "pod": want namespace, label:KEY or annotation:KEY`, nil, false},
		{"model id source without a key", []string{"--service-discovery", "--selector", "app=x", "--model-id-source", "label:"}, nil, `--model-id-source "label:"`, nil, false},
		{"bad discovery variable", nil, map[string]string{"MESHGW_SERVICE_DISCOVERY": "yes please"}, `$MESHGW_SERVICE_DISCOVERY: --service-discovery "yes please" is not true or false`, nil, false},
		{"bad router selector", []string{"--router-selector", "meshgw"}, nil, `--router-selector "meshgw": "meshgw" is not key=value`, nil, false},
		{"router selector and join", []string{"--router-selector", "app=meshgw", "--join", "10.0.0.1", "--bootstrap-expect", "3"}, nil, "--router-selector and --join both say how to find the other gateways", nil, false},
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
			if diff := cmp.Diff(tt.want, o.disc.config()); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if o.health.cfg.RemoveUnhealthyWorkers != tt.wantRemoval {
				t.Errorf("remove unhealthy workers %v, want %v", o.health.cfg.RemoveUnhealthyWorkers, tt.wantRemoval)
			}
		})
	}
}

// TestDiscoveryBadFlagExitsTwo: the process exits 2 with one line for a bad discovery flag.
func TestDiscoveryBadFlagExitsTwo(t *testing.T) {
	for _, args := range [][]string{{"--service-discovery"}, {"--service-discovery", "--selector", "app"}, {"--service-discovery", "--selector", "app=x", "--model-id-source", "pod"}} {
		var stdout, stderr bytes.Buffer
		code := run(args, env(nil), &stdout, &stderr)
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		if code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], "meshgw: --") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}
