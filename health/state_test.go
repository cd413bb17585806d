package health

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var allStates = []State{Pending, Ready, NotReady, Failed, Draining}
var allEvents = []Event{Success, Failure, Reached, ChecksOff, Drain}

func TestStateAndEventNames(t *testing.T) {
	var got []string
	for _, s := range allStates {
		got = append(got, s.String())
		back, err := ParseState(s.String())
		if err != nil || back != s {
			t.Errorf("ParseState(%q) = %v, %v; want %v", s, back, err, s)
		}
	}
	if want := []string{"pending", "ready", "not_ready", "failed", "draining"}; !slices.Equal(got, want) {
		t.Errorf("state names = %v, want %v", got, want)
	}
	if _, err := ParseState("healthy"); err == nil {
		t.Error("ParseState(healthy) did not fail")
	}
	if got := State(9).String(); got != "state(9)" {
		t.Errorf("State(9) = %q", got)
	}
	if got := Drain.String(); got != "drain" {
		t.Errorf("Drain = %q", got)
	}
}

// TestMachineEveryPair applies every event to a fresh machine in every state, at several
// threshold pairs. A single event flips a state only where a threshold of 1 allows it.
func TestMachineEveryPair(t *testing.T) {
	type want struct {
		To        State
		Promotion bool
		Settle    bool
	}
	stay := func(s State) want { return want{To: s} }
	promo := want{To: Ready, Promotion: true}
	drain := want{To: Draining}
	for _, th := range []struct{ f, s int }{{2, 3}, {4, 1}, {1, 1}} {
		// oneFlip is the state a single event of the kind reaches when its threshold is 1.
		sOne := th.s == 1
		fOne := th.f == 1
		pick := func(cond bool, yes, no want) want {
			if cond {
				return yes
			}
			return no
		}
		table := map[State]map[Event]want{
			Pending: {
				Success: pick(sOne, promo, stay(Pending)), Failure: stay(Pending),
				Reached: promo, ChecksOff: promo, Drain: drain,
			},
			Ready: {
				Success: stay(Ready), Failure: pick(fOne, stay(NotReady), stay(Ready)),
				Reached: stay(Ready), ChecksOff: stay(Ready), Drain: {To: Draining, Settle: true},
			},
			NotReady: {
				Success: pick(sOne, promo, stay(NotReady)), Failure: stay(NotReady),
				Reached: stay(NotReady), ChecksOff: promo, Drain: drain,
			},
			Failed: {
				Success: pick(sOne, promo, stay(Failed)), Failure: stay(Failed),
				Reached: stay(Failed), ChecksOff: promo, Drain: drain,
			},
			Draining: {
				Success: stay(Draining), Failure: stay(Draining),
				Reached: stay(Draining), ChecksOff: stay(Draining), Drain: stay(Draining),
			},
		}
		for _, st := range allStates {
			for _, ev := range allEvents {
				t.Run(fmt.Sprintf("F%d_S%d/%s/%s", th.f, th.s, st, ev), func(t *testing.T) {
					m := NewMachine(th.f, th.s, st)
					tr := m.Apply(ev)
					w := table[st][ev]
					got := want{To: tr.To, Promotion: tr.Promotion, Settle: tr.Settle}
					if tr.From != st {
						t.Errorf("From = %v, want %v", tr.From, st)
					}
					if diff := cmp.Diff(w, got); diff != "" {
						t.Errorf("(-want +got):\n%s", diff)
					}
					if tr.Changed() != (w.To != st) {
						t.Errorf("Changed() = %v", tr.Changed())
					}
					if m.State() != w.To {
						t.Errorf("State() = %v, want %v", m.State(), w.To)
					}
				})
			}
		}
	}
}

// run applies evs and returns the index (1-based) of each state change with its transition.
func run(m *Machine, evs ...Event) []step {
	var out []step
	for i, ev := range evs {
		if tr := m.Apply(ev); tr.Changed() {
			out = append(out, step{N: i + 1, T: tr})
		}
	}
	return out
}

type step struct {
	N int
	T Transition
}

func repeat(ev Event, n int) []Event { return slices.Repeat([]Event{ev}, n) }

func seq(parts ...[]Event) []Event { return slices.Concat(parts...) }

// TestMachineMultiples checks every count of DESIGN.md section 6 at non-default thresholds.
func TestMachineMultiples(t *testing.T) {
	for _, th := range []struct{ f, s int }{{2, 3}, {4, 1}, {3, 2}} {
		f, s := th.f, th.s
		promo := func(from State) Transition { return Transition{From: from, To: Ready, Promotion: true} }
		tests := []struct {
			name  string
			start State
			evs   []Event
			want  []step
		}{
			{"pending_ready_after_S_successes", Pending, repeat(Success, s),
				[]step{{s, promo(Pending)}}},
			{"pending_failed_after_10F_failures", Pending, repeat(Failure, 10*f),
				[]step{{10 * f, Transition{From: Pending, To: Failed}}}},
			{"ready_not_ready_after_F_then_failed_after_3F_more", Ready, repeat(Failure, 4*f),
				[]step{{f, Transition{From: Ready, To: NotReady}}, {4 * f, Transition{From: NotReady, To: Failed}}}},
			{"ready_failures_not_consecutive_stay_ready", Ready,
				seq(repeat(Failure, f-1), []Event{Success}, repeat(Failure, f-1)), nil},
			{"not_ready_ready_after_S_successes", NotReady, repeat(Success, s),
				[]step{{s, promo(NotReady)}}},
			{"not_ready_count_restarts_after_success", NotReady,
				seq(repeat(Failure, 3*f-1), []Event{Success}, repeat(Failure, 3*f)),
				sticky(s, 3*f, f)},
			{"failed_ready_after_S_successes", Failed, repeat(Success, s),
				[]step{{s, promo(Failed)}}},
			{"failed_stays_failed_on_failures", Failed, repeat(Failure, 100), nil},
			{"ready_passing_probes_are_no_promotion", Ready, repeat(Success, 10), nil},
		}
		if s > 1 {
			// Successes that never reach S still count as pending attempts.
			pattern := seq(repeat(Success, s-1), []Event{Failure})
			evs := slices.Repeat(pattern, 10*f) // 10F·s probes: the first 10F decide
			tests = append(tests, struct {
				name  string
				start State
				evs   []Event
				want  []step
			}{"pending_failed_after_10F_probes_without_S", Pending, evs[:10*f],
				[]step{{10 * f, Transition{From: Pending, To: Failed}}}})
		}
		for _, tc := range tests {
			t.Run(fmt.Sprintf("F%d_S%d/%s", f, s, tc.name), func(t *testing.T) {
				m := NewMachine(f, s, tc.start)
				if diff := cmp.Diff(tc.want, run(&m, tc.evs...)); diff != "" {
					t.Errorf("transitions (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// sticky is the expected run of not_ready_count_restarts_after_success: with S = 1 the success
// promotes the worker and the failures that follow take it back down; otherwise it reaches failed
// only on the 3F-th failure after the success.
func sticky(s, n, f int) []step {
	ok := n // failures before the success
	if s == 1 {
		return []step{
			{ok, Transition{From: NotReady, To: Ready, Promotion: true}},
			{ok + f, Transition{From: Ready, To: NotReady}},
		}
	}
	return []step{{ok + n, Transition{From: NotReady, To: Failed}}}
}

func TestMachineCounters(t *testing.T) {
	m := NewMachine(2, 3, Pending)
	run(&m, Success, Success, Failure, Failure)
	if m.ConsecutiveFailures() != 2 || m.ConsecutiveSuccesses() != 0 {
		t.Errorf("fails, succs = %d, %d; want 2, 0", m.ConsecutiveFailures(), m.ConsecutiveSuccesses())
	}
	run(&m, Success)
	if m.ConsecutiveFailures() != 0 || m.ConsecutiveSuccesses() != 1 {
		t.Errorf("fails, succs = %d, %d; want 0, 1", m.ConsecutiveFailures(), m.ConsecutiveSuccesses())
	}
}

func TestMachineZeroValueUsesDefaults(t *testing.T) {
	var m Machine
	if f, s := m.Thresholds(); f != DefaultFailureThreshold || s != DefaultSuccessThreshold {
		t.Fatalf("Thresholds() = %d, %d", f, s)
	}
	got := run(&m, repeat(Failure, 30)...)
	if diff := cmp.Diff([]step{{30, Transition{From: Pending, To: Failed}}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestMachineSetThresholdsKeepsState changes the thresholds mid-run, as a PATCH does.
func TestMachineSetThresholdsKeepsState(t *testing.T) {
	m := NewMachine(3, 2, Ready)
	run(&m, Failure, Failure)
	m.SetThresholds(5, 2)
	if got := run(&m, Failure, Failure); got != nil {
		t.Fatalf("flipped at 4 failures with F=5: %v", got)
	}
	got := run(&m, Failure)
	if diff := cmp.Diff([]step{{1, Transition{From: Ready, To: NotReady}}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if m.ConsecutiveFailures() != 5 {
		t.Errorf("ConsecutiveFailures = %d, want 5", m.ConsecutiveFailures())
	}
}
