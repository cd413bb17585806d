package owned

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/test/testkit"
)

// TestStatusListsRecentTransitions: Status carries the worker's health and breaker transitions
// in order, with their times, for `meshctl workers get`; at most maxTransitions are kept.
func TestStatusListsRecentTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		id := f.own(httpSpec(9001), 1)
		synctest.Wait()
		f.wantHealth(id, health.Ready)
		w := f.pool.Get(id)
		for range 3 {
			f.m.OnOutcome(w, 500, false)
		}
		f.probe.set(id, errDown)
		for range 3 {
			testkit.Advance(10 * time.Second)
		}
		f.wantHealth(id, health.NotReady)
		f.probe.set(id, nil)
		testkit.Advance(10 * time.Second)
		testkit.Advance(10 * time.Second)
		f.wantHealth(id, health.Ready)
		st, _ := f.m.Status(id)
		var got []string
		for _, tr := range st.Transitions {
			got = append(got, fmt.Sprintf("%s %s->%s", tr.Kind, tr.From, tr.To))
			if tr.At.IsZero() {
				t.Errorf("transition %+v has no time", tr)
			}
		}
		want := fmt.Sprint([]string{"health pending->ready", "breaker closed->open", "health ready->not_ready",
			"health not_ready->ready", "breaker open->half_open"})
		if fmt.Sprint(got) != want {
			t.Errorf("transitions %v\nwant %v", got, want)
		}
		for i := 1; i < len(st.Transitions); i++ {
			if st.Transitions[i].At.Before(st.Transitions[i-1].At) {
				t.Errorf("transitions out of order: %+v", st.Transitions)
			}
		}
	})
	tr := &transitions{}
	for i := range maxTransitions + 5 {
		tr.add("health", fmt.Sprint(i), fmt.Sprint(i+1))
	}
	if l := tr.recent(); len(l) != maxTransitions || l[0].From != "5" || l[maxTransitions-1].To != fmt.Sprint(maxTransitions+5) {
		t.Errorf("kept %+v", l)
	}
}
