package breaker

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTally(t *testing.T) {
	type attempt struct {
		worker  int
		outcome Outcome
		want    bool // recorded
	}
	tests := []struct {
		name      string
		attempts  []attempt
		failures  []int // consecutive failures per worker afterwards
		successes []int
	}{
		{"one attempt", []attempt{{0, Success, true}}, []int{0, 0, 0, 0}, []int{1, 0, 0, 0}},
		{"same worker fails twice: one failed request",
			[]attempt{{0, Failure, true}, {0, Failure, false}}, []int{1, 0, 0, 0}, []int{0, 0, 0, 0}},
		{"fails then succeeds on the same worker: the first outcome stands",
			[]attempt{{0, Failure, true}, {0, Success, false}}, []int{1, 0, 0, 0}, []int{0, 0, 0, 0}},
		{"capacity answer does not use up the worker's outcome",
			[]attempt{{0, Ignored, false}, {0, Failure, true}}, []int{1, 0, 0, 0}, []int{0, 0, 0, 0}},
		{"retries across workers",
			[]attempt{{0, Failure, true}, {1, Failure, true}, {0, Failure, false}, {2, Success, true}},
			[]int{1, 1, 0, 0}, []int{0, 0, 1, 0}},
		{"more workers than the inline slots",
			[]attempt{{0, Failure, true}, {1, Failure, true}, {2, Failure, true}, {3, Failure, true},
				{2, Failure, false}, {3, Failure, false}, {0, Failure, false}},
			[]int{1, 1, 1, 1}, []int{0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := make([]*Breaker, 4)
			for i := range bs {
				bs[i] = New(testConfig(), Options{})
			}
			var tl Tally
			for i, a := range tt.attempts {
				if got := tl.Record(bs[a.worker], a.outcome); got != a.want {
					t.Errorf("attempt %d on worker %d: recorded = %v, want %v", i, a.worker, got, a.want)
				}
			}
			var f, s []int
			for _, b := range bs {
				snap := b.Snapshot()
				f, s = append(f, snap.ConsecutiveFailures), append(s, snap.ConsecutiveSuccesses)
			}
			if diff := cmp.Diff(tt.failures, f); diff != "" {
				t.Errorf("failures (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.successes, s); diff != "" {
				t.Errorf("successes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTallyNilBreaker(t *testing.T) {
	var tl Tally
	if tl.Record(nil, Failure) {
		t.Fatal("recorded on a nil breaker")
	}
}

func TestTallyAllocatesNothingForTwoWorkers(t *testing.T) {
	a, b := New(DefaultConfig(), Options{}), New(DefaultConfig(), Options{})
	allocs := testing.AllocsPerRun(100, func() {
		var tl Tally
		tl.Record(a, Failure)
		tl.Record(a, Failure)
		tl.Record(b, Success)
	})
	if allocs != 0 {
		t.Fatalf("Tally allocated %v times per request", allocs)
	}
}
