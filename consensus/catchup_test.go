package consensus

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/test/testkit"
)

// fakeLeader is a CatchUpNode whose leader a test sets, with a barrier the test answers.
type fakeLeader struct {
	signals
	mu     sync.Mutex
	leader string
	// answer is what the next barriers return; nil answers block until their context ends.
	answer func() error
	calls  int
}

func (n *fakeLeader) Info() (Info, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return Info{Leader: n.leader}, nil
}

func (n *fakeLeader) barrier(ctx context.Context) error {
	n.mu.Lock()
	n.calls++
	answer := n.answer
	n.mu.Unlock()
	if answer == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	return answer()
}

// set changes the node under its lock and signals.
func (n *fakeLeader) set(f func(n *fakeLeader)) {
	n.mu.Lock()
	f(n)
	n.mu.Unlock()
	n.signal()
}

func (n *fakeLeader) callCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls
}

func succeed() error { return nil }

var errNotYet = errors.New("not applied yet")

func failing() error { return errNotYet }

// TestCatchUp: a follower is caught up once it knows a leader other than itself and the barrier
// through that leader (its read index, applied here) succeeded; no barrier is tried without a
// leader or while this node leads.
func TestCatchUp(t *testing.T) {
	type step struct {
		leader string
		answer func() error
		want   bool
	}
	tests := []struct {
		name      string
		steps     []step
		wantCalls int
	}{
		{"caught up at once", []step{{"L", succeed, true}}, 1},
		{"no leader", []step{{"", succeed, false}}, 0},
		{"this node leads: the leader loop's business", []step{{"self", succeed, false}}, 0},
		{"a leader appears", []step{{"", succeed, false}, {"L", succeed, true}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				node := &fakeLeader{}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var leader string
				var ok bool
				c := CatchUp{Self: "self", Node: node, Barrier: node.barrier, Poll: time.Hour, Logger: testkit.Quiet()}
				start := time.Now()
				var done <-chan struct{}
				for i, s := range tt.steps {
					node.set(func(n *fakeLeader) { n.leader, n.answer = s.leader, s.answer })
					if done == nil {
						done = runUntil(func() { leader, ok = c.Wait(ctx) })
					}
					synctest.Wait()
					if isClosed(done) != s.want {
						t.Fatalf("step %d: caught up %v, want %v", i, isClosed(done), s.want)
					}
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("%s passed: the signals were not followed at once", d)
				}
				cancel()
				<-done
				if want := tt.steps[len(tt.steps)-1].want; ok != want || (want && leader != "L") {
					t.Errorf("Wait returned %q, %v", leader, ok)
				}
				if got := node.callCount(); got != tt.wantCalls {
					t.Errorf("%d barriers, want %d", got, tt.wantCalls)
				}
			})
		})
	}
}

// TestCatchUpRetries: a failed barrier is tried again after Poll, without a signal; one that
// hangs is given up after catchUpAttempt and tried again.
func TestCatchUpRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := &fakeLeader{leader: "L", answer: failing}
		c := CatchUp{Self: "self", Node: node, Barrier: node.barrier, Logger: testkit.Quiet()}
		start := time.Now()
		done := runUntil(func() { c.Wait(context.Background()) })
		synctest.Wait()
		node.mu.Lock() // no signal
		node.answer = succeed
		node.mu.Unlock()
		<-done
		if d := time.Since(start); d != DefaultCatchUpPoll {
			t.Errorf("caught up after %s, want the poll %s", d, DefaultCatchUpPoll)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		node := &fakeLeader{leader: "L"} // the barrier hangs
		c := CatchUp{Self: "self", Node: node, Barrier: node.barrier, Logger: testkit.Quiet()}
		start := time.Now()
		done := runUntil(func() { c.Wait(context.Background()) })
		synctest.Wait()
		node.mu.Lock()
		node.answer = succeed
		node.mu.Unlock()
		<-done
		if d, want := time.Since(start), catchUpAttempt+DefaultCatchUpPoll; d != want {
			t.Errorf("caught up after %s, want the attempt bound and a poll, %s", d, want)
		}
		if got := node.callCount(); got != 2 {
			t.Errorf("%d barriers, want 2", got)
		}
	})
}
