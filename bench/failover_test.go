package bench

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseOwners(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []ownerRow
		wantErr bool
	}{
		{name: "the documented answer",
			body: `{"owners": [
  {"worker": "w-00aa11bb22cc", "url": "http://10.0.0.9:9000", "owner": "gw-2", "epoch": 7,
   "health_state": "pending", "breaker": "unknown", "disabled": true, "is_dead": false, "stale": false, "origin": "mesh"},
  {"worker": "w-3f1c0a9b2d44", "url": "http://127.0.0.1:8013", "owner": "gw-1", "epoch": 5, "origin": "local", "new_field": 1}]}`,
			want: []ownerRow{{"w-00aa11bb22cc", "gw-2", 7}, {"w-3f1c0a9b2d44", "gw-1", 5}}},
		{name: "no workers", body: `{"owners": []}`, want: []ownerRow{}},
		{name: "an error answer", body: `{"error": {"code": "unavailable"}}`, wantErr: true},
		{name: "not JSON", body: `<html>`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseOwners([]byte(tt.body))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("rows %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("row %d %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestOwnedBy(t *testing.T) {
	rows := []ownerRow{{"w1", "g2", 10}, {"w2", "g2", 11}, {"w3", "g1", 12}}
	if got := ownedBy(rows, []string{"w1", "w2"}, "g2"); len(got) != 2 || got["w1"] != 10 || got["w2"] != 11 {
		t.Errorf("w1, w2 owned by g2: %v", got)
	}
	if got := ownedBy(rows, []string{"w1", "w3"}, "g2"); got != nil {
		t.Errorf("w3 is g1's, yet %v", got)
	}
	if got := ownedBy(rows, []string{"w1", "w4"}, "g2"); got != nil {
		t.Errorf("w4 is not registered yet, yet %v", got)
	}
}

func TestAllMoved(t *testing.T) {
	before := map[string]uint64{"w1": 10, "w2": 11}
	live := []string{"g1", "g3"}
	tests := []struct {
		name string
		rows []ownerRow
		want bool
	}{
		{"both moved", []ownerRow{{"w1", "g1", 20}, {"w2", "g3", 20}}, true},
		{"other workers do not count", []ownerRow{{"w0", "g2", 1}, {"w1", "g3", 20}, {"w2", "g3", 20}}, true},
		{"one still on the dead owner", []ownerRow{{"w1", "g1", 20}, {"w2", "g2", 11}}, false},
		{"moved to a gateway not alive", []ownerRow{{"w1", "g1", 20}, {"w2", "g4", 20}}, false},
		{"a live owner at the old epoch", []ownerRow{{"w1", "g1", 10}, {"w2", "g3", 20}}, false},
		{"one row missing", []ownerRow{{"w1", "g1", 20}}, false},
		{"no rows", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := allMoved(tt.rows, before, live); got != tt.want {
				t.Errorf("allMoved = %v, want %v", got, tt.want)
			}
		})
	}
	if allMoved(nil, map[string]uint64{}, live) {
		t.Error("no workers at all counted as moved")
	}
}

func TestFailoverGoal(t *testing.T) {
	const name = "failover after kill -9, local profile, 3 s grace"
	res := func(workers int, grace, medianS float64) FailoverResult {
		return FailoverResult{Status: "measured", Gateways: 3, Workers: workers, Profile: "local", GraceS: grace,
			RunsS: []float64{medianS}, MedianS: medianS, MaxS: medianS}
	}
	tests := []struct {
		name string
		f    FailoverResult
		goal string
		want *bool
	}{
		{"met at the bound", res(100, 3, 10), name, met(true)},
		{"missed", res(100, 3, 10.01), name, met(false)},
		{"quick run: no verdict", res(20, 3, 4), name, nil},
		{"shorter grace: no verdict", res(100, 1, 4), "failover after kill -9, local profile, 1 s grace", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{Mesh: MeshResult{Status: "measured", Failover: tt.f}}
			var got *Goal
			for _, g := range controlGoals(r) {
				if g.Name == tt.goal {
					got = &g
				}
			}
			if got == nil {
				t.Fatalf("no goal %q in %+v", tt.goal, controlGoals(r))
			}
			if (got.Met == nil) != (tt.want == nil) || (got.Met != nil && *got.Met != *tt.want) {
				t.Errorf("verdict %v, want %v (%+v)", got.Met, tt.want, got)
			}
		})
	}
	r := &Report{Mesh: MeshResult{Status: "measured", Failover: notMeasured("x")}}
	for _, g := range controlGoals(r) {
		if strings.HasPrefix(g.Name, "failover") {
			t.Errorf("a failover not measured gave the goal %+v", g)
		}
	}
}

func TestPrintFailover(t *testing.T) {
	conv := &MeshConvergence{Peers: 100, Profile: "local", RunsS: []float64{0.5}, MedianS: 0.5, MaxS: 0.5}
	for _, tt := range []struct {
		failover any
		want     string
	}{
		{FailoverResult{Workers: 100, Profile: "local", GraceS: 3, RunsS: []float64{6.5, 7}, MedianS: 6.75, MaxS: 7},
			"failover, 100 workers, local profile, 3 s grace: all owned again 6.75 s median, 7.00 s max after kill -9 over 2 runs"},
		{notMeasured("failover: run 1: g2 exited"), "failover: not yet measured (failover: run 1: g2 exited)"},
	} {
		var b bytes.Buffer
		r := &Report{Mesh: MeshResult{Status: "measured", LAN: conv, Local: conv, Failover: tt.failover}}
		r.printSections(&b)
		if !strings.Contains(b.String(), tt.want) {
			t.Errorf("printed %q, want %q in it", b.String(), tt.want)
		}
	}
}
