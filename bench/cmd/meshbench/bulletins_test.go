package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/mesh"
)

func TestNearestRank(t *testing.T) {
	ten := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		name string
		d    []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", []time.Duration{7}, 0.99, 7},
		{"p50 of ten", ten, 0.5, 5},
		{"p99 of ten is the max", ten, 0.99, 10},
		{"p0 is the min", ten, 0, 1},
		{"max", ten, 1, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nearestRank(tt.d, tt.q); got != tt.want {
				t.Errorf("nearestRank(%v, %g) = %v, want %v", tt.d, tt.q, got, tt.want)
			}
		})
	}
}

func TestSummarizeTrials(t *testing.T) {
	peer := func(i int) string { return []string{"gw-001", "gw-002"}[i] }
	const ms, ms10, ms20 = time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond
	tests := []struct {
		name   string
		trials [][]time.Duration
		want   BulletinsResult
	}{
		{name: "all arrived",
			trials: [][]time.Duration{{ms10, ms20}, {30 * time.Millisecond, ms10}},
			want: BulletinsResult{Pairs: 4, P50Ms: 10, P99Ms: 30, MaxMs: 30, BoundMs: 5000, AllP50Ms: 20, AllP99Ms: 30,
				Slowest: []SlowPair{{2, "gw-001", 30}, {1, "gw-002", 20}, {1, "gw-001", 10}, {2, "gw-002", 10}}}},
		{name: "a lost pair counts as the bound and is the slowest",
			trials: [][]time.Duration{{ms10, -1}, {1500 * time.Millisecond, ms20}},
			want: BulletinsResult{Pairs: 4, P50Ms: 20, P99Ms: 5000, MaxMs: 5000, Lost: 1, BoundMs: 5000, Over1s: 2,
				AllP50Ms: 1500, AllP99Ms: 5000,
				Slowest: []SlowPair{{1, "gw-002", -1}, {2, "gw-001", 1500}, {2, "gw-002", 20}, {1, "gw-001", 10}}}},
		{name: "at most five slowest",
			trials: [][]time.Duration{{1 * ms, 2 * ms}, {3 * ms, 4 * ms}, {5 * ms, 6 * ms}},
			want: BulletinsResult{Pairs: 6, P50Ms: 3, P99Ms: 6, MaxMs: 6, BoundMs: 5000, AllP50Ms: 4, AllP99Ms: 6,
				Slowest: []SlowPair{{3, "gw-002", 6}, {3, "gw-001", 5}, {2, "gw-002", 4}, {2, "gw-001", 3}, {1, "gw-002", 2}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summarizeTrials(tt.trials, 5*time.Second, peer)
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
		})
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestTracker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := func(w string, h health.State) []mesh.Bulletin { return []mesh.Bulletin{{Worker: w, Health: h}} }
	tr := newTracker(2)
	done := tr.expect(map[string]health.State{"a": health.Ready, "b": health.Ready}, t0)
	tr.record(0, append(b("a", health.Ready), b("b", health.Ready)...), t0.Add(10*time.Millisecond))
	tr.record(1, b("a", health.Ready), t0.Add(20*time.Millisecond))
	tr.record(1, b("other", health.Ready), t0.Add(25*time.Millisecond))
	if closed(done) || tr.holding() != 1 {
		t.Fatalf("done with peer 1 missing b; holding %d", tr.holding())
	}
	tr.record(1, b("b", health.Ready), t0.Add(30*time.Millisecond))
	if !closed(done) || tr.holding() != 2 {
		t.Fatalf("not done when both peers hold both; holding %d", tr.holding())
	}
	if diff := cmp.Diff([]time.Duration{10 * time.Millisecond, 30 * time.Millisecond}, tr.arrivals()); diff != "" {
		t.Errorf("arrivals (-want +got):\n%s", diff)
	}

	// A flip: peer 0 sees it, peer 1 does not; a later flip back un-matches nothing already timed.
	done = tr.expect(map[string]health.State{"a": health.NotReady}, t0.Add(time.Second))
	tr.record(0, b("a", health.NotReady), t0.Add(time.Second+5*time.Millisecond))
	tr.record(1, b("a", health.Draining), t0.Add(time.Second+6*time.Millisecond))
	if closed(done) {
		t.Fatal("done although peer 1 holds another health")
	}
	if diff := cmp.Diff([]time.Duration{5 * time.Millisecond, -1}, tr.arrivals()); diff != "" {
		t.Errorf("arrivals (-want +got):\n%s", diff)
	}

	// What every peer already holds is done at once, with zero arrival times.
	if done := tr.expect(map[string]health.State{"b": health.Ready}, t0.Add(2*time.Second)); !closed(done) {
		t.Error("expecting a state every peer holds is not done at once")
	}
	if diff := cmp.Diff([]time.Duration{0, 0}, tr.arrivals()); diff != "" {
		t.Errorf("arrivals (-want +got):\n%s", diff)
	}

	// A bulletin of unknown health holds no state, not even pending.
	tr.record(0, []mesh.Bulletin{{Worker: "c", HealthUnknown: true}}, t0.Add(3*time.Second))
	tr.record(1, b("c", health.Pending), t0.Add(3*time.Second))
	if done := tr.expect(map[string]health.State{"c": health.Pending}, t0.Add(3*time.Second)); closed(done) || tr.holding() != 1 {
		t.Errorf("peer 0 holds c pending after a bulletin of unknown health; holding %d, want 1", tr.holding())
	}
}

// TestBulletins runs the propagation benchmark with 3 peers and checks what it prints.
func TestBulletins(t *testing.T) {
	var out, errs bytes.Buffer
	code := run(context.Background(), []string{"bulletins", "--peers", "3", "--profile", "local", "--workers", "2", "--trials", "4", "--timeout", "30s"}, &out, &errs)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	var res BulletinsResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	if res.Peers != 3 || res.Trials != 4 || res.Pairs != 8 || res.P50Ms <= 0 || res.P99Ms < res.P50Ms || res.MaxMs < res.P99Ms ||
		res.Lost != 0 || len(res.Slowest) != 5 {
		t.Errorf("result %+v", res)
	}
}

// TestBulletinBytes runs the traffic benchmark on a small fleet and checks what it prints.
func TestBulletinBytes(t *testing.T) {
	var out, errs bytes.Buffer
	code := run(context.Background(), []string{"bulletin-bytes", "--peers", "3", "--profile", "local", "--workers", "50",
		"--window", "300ms", "--settle", "0s", "--churn", "100", "--timeout", "30s"}, &out, &errs)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	var res BulletinBytesResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	if res.Workers != 50 || res.Churn.Changes < 1 || res.Churn.OwnerBytesPerS <= 0 || res.Churn.PeerBytesPerS <= 0 ||
		res.Steady.Changes != 0 || res.ChurnHeldS < 0 {
		t.Errorf("result %+v", res)
	}
}
