package bench

import (
	"testing"
	"time"
)

func TestMemStat(t *testing.T) {
	profile := []byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 123\n# HeapAlloc = 4567\n# Sys = 89\n")
	if v, err := memStat(profile, "HeapAlloc"); err != nil || v != 4567 {
		t.Errorf("HeapAlloc = %d, %v", v, err)
	}
	if _, err := memStat(profile, "HeapInuse"); err == nil {
		t.Error("a missing stat was not an error")
	}
}

func TestQuantiles(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p50, p99, mx := quantiles(ds)
	if p50 != 51 || p99 != 100 || mx != 100 {
		t.Errorf("p50 %v p99 %v max %v, want 51 100 100", p50, p99, mx)
	}
	if a, b, c := quantiles(nil); a != 0 || b != 0 || c != 0 {
		t.Error("no samples gave figures")
	}
}

func TestControlGoals(t *testing.T) {
	verdicts := func(r *Report) map[string]*bool {
		out := map[string]*bool{}
		for _, g := range controlGoals(r) {
			out[g.Name] = g.Met
		}
		return out
	}
	r := &Report{
		Health: HealthResult{Workers: 10_000, IntervalS: 1, CPUPercent: 50, PeakRSSMiB: 64, ProbesPerSec: 9_990, ExpectedPerSec: 10_000},
		Raft:   RaftResult{Admin: &WriteLatency{Nodes: 1, P99Ms: 10}, Cluster: &WriteLatency{Nodes: 3, P99Ms: 10.1}},
		Memory: MemoryResult{Workers: 100_000, BytesPerWorker: 2048, StartS: 2.01},
	}
	want := map[string]bool{
		"health checks, 10000 workers every 1s":       true,
		"admin write commit p99, 1 node (admin API)":  true,
		"write commit p99, 3 nodes (consensus layer)": false,
		"heap per imported worker":                    true,
		"start with the workers in raft state":        false,
	}
	got := verdicts(r)
	for name, w := range want {
		if got[name] == nil || *got[name] != w {
			t.Errorf("%s: verdict %v, want %v", name, got[name], w)
		}
	}
	// A quick run's smaller fleet gives the start time no verdict; sections not measured give no goals.
	r = &Report{Health: notMeasured("x"), Raft: notMeasured("x"), Memory: MemoryResult{Workers: 20_000, StartS: 0.3}}
	got = verdicts(r)
	if len(got) != 2 || got["start with the workers in raft state"] != nil {
		t.Errorf("quick run verdicts %v", got)
	}
}

func TestMeshGoals(t *testing.T) {
	r := &Report{Mesh: MeshResult{
		LAN:   &MeshConvergence{Peers: 100, Profile: "lan", MedianS: 2.4},
		Local: &MeshConvergence{Peers: 100, Profile: "local", MedianS: 0.9},
	}}
	got := map[string]*bool{}
	for _, g := range controlGoals(r) {
		got[g.Name] = g.Met
	}
	if v := got["membership convergence, 100 peers, lan profile"]; v == nil || *v {
		t.Errorf("lan at 2.4 s: verdict %v, want not met", v)
	}
	if v := got["membership convergence, 100 peers, local profile"]; v == nil || !*v {
		t.Errorf("local at 0.9 s: verdict %v, want met", v)
	}
	r.Mesh = MeshResult{Local: &MeshConvergence{Peers: 30, Profile: "local", MedianS: 0.5}}
	for _, g := range controlGoals(r) {
		if g.Met != nil {
			t.Errorf("a quick run's 30 peers gave %q a verdict", g.Name)
		}
	}
}
