package breaker

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/test/testkit"
)

// step is one outcome recorded at a time since the start.
type step struct {
	at time.Duration
	o  Outcome
}

// TestHangRule: the rule judges a worker hung at the second request that timed out while the
// worker answered nobody for the whole wait, and never while it still answers now and then (a
// long prefill), whoever reports.
func TestHangRule(t *testing.T) {
	const T = 3 * time.Second
	s := time.Second
	tests := []struct {
		name  string
		steps []step
		want  []int // the steps judged hung
	}{
		{"two timeouts, no answer ever", []step{{3 * s, TimedOut}, {3100 * time.Millisecond, TimedOut}}, []int{1}},
		{"two timeouts after a silence of T", []step{{0, Success}, {3 * s, TimedOut}, {3200 * time.Millisecond, TimedOut}}, []int{2}},
		{"within the slack of the last answer", []step{{0, Success}, {2600 * time.Millisecond, TimedOut}, {2700 * time.Millisecond, TimedOut}}, []int{2}},
		{"too soon after the last answer", []step{{0, Success}, {2400 * time.Millisecond, TimedOut}, {2450 * time.Millisecond, TimedOut}}, nil},
		{"one timeout is not enough", []step{{0, Success}, {3 * s, TimedOut}, {20 * s, Failure}}, nil},
		{"answered during the waits: a long prefill", []step{
			{0, Success}, {1 * s, TimedOut}, {2 * s, TimedOut}, {2500 * time.Millisecond, Success},
			{4 * s, TimedOut}, {5 * s, Success}, {7 * s, TimedOut}, {7500 * time.Millisecond, Success}, {9 * s, TimedOut},
		}, nil},
		{"an answer between two silent timeouts starts the count again", []step{
			{3 * s, TimedOut}, {4 * s, Success}, {8 * s, TimedOut}, {12 * s, TimedOut},
		}, []int{3}},
		{"failures that answered neither count nor reset", []step{
			{0, Success}, {3 * s, TimedOut}, {3100 * time.Millisecond, Failure}, {3200 * time.Millisecond, TimedOut},
		}, []int{3}},
		{"a judgment starts the count again", []step{
			{3 * s, TimedOut}, {3 * s, TimedOut}, {3 * s, TimedOut}, {4 * s, TimedOut},
		}, []int{1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
			var h hangWatch
			var got []int
			for i, st := range tt.steps {
				var hung bool
				if h, hung = h.next(st.o, start.Add(st.at), T); hung {
					got = append(got, i)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("steps judged hung (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("off without a request timeout", func(t *testing.T) {
		var h hangWatch
		for range 5 {
			var hung bool
			if h, hung = h.next(TimedOut, time.Now(), 0); hung {
				t.Fatal("judged hung with the rule off")
			}
		}
	})
}

// TestHangOpensTheCircuit: on a breaker, the rule opens a closed circuit (OnHang after the
// transition) well below the failure threshold, and leaves a disabled breaker closed; a
// promotion forgets what it counted.
func TestHangOpensTheCircuit(t *testing.T) {
	cfg := Config{FailureThreshold: 10, SuccessThreshold: 3, Timeout: time.Minute, Window: time.Minute, HangTimeout: 3 * time.Second}
	tests := []struct {
		name     string
		disabled bool
		promote  bool
		want     State
		hooks    []string
	}{
		{"opens", false, false, Open, []string{"outcome success", "counts 0 1", "outcome timed_out", "counts 1 0",
			"transition closed->open", "hang", "outcome timed_out", "counts 2 0"}},
		{"disabled stays closed", true, false, Closed, []string{"outcome success", "counts 0 1", "outcome timed_out", "counts 1 0",
			"outcome timed_out", "counts 2 0"}},
		{"a promotion in between", false, true, Closed, []string{"outcome success", "counts 0 1", "outcome timed_out", "counts 1 0",
			"counts 0 0", "outcome timed_out", "counts 1 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := cfg
				c.Disabled = tt.disabled
				rec := &recorder{}
				b := New(c, Options{Hooks: rec.hooks()})
				b.Record(Success)
				testkit.Advance(4 * time.Second) // fake time: the bubble's clock
				b.Record(TimedOut)
				if tt.promote {
					b.Promote()
				}
				testkit.Advance(100 * time.Millisecond)
				b.Record(TimedOut)
				if got := b.State(); got != tt.want {
					t.Errorf("state %v, want %v", got, tt.want)
				}
				if diff := cmp.Diff(tt.hooks, rec.take()); diff != "" {
					t.Errorf("hooks (-want +got):\n%s", diff)
				}
			})
		})
	}
}
