package weights

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
)

// closeFails is a writer whose closes of a record as not started fail: errs[i] answers the
// i-th attempt (the last repeats; nil applies it). applied applies a failed attempt all the same
// (an outcome-unknown write that committed).
type closeFails struct {
	*fsmWriter
	errs    []error
	applied bool

	mu       sync.Mutex
	attempts int
}

func (w *closeFails) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	if r, ok := cmd.(fsm.JournalResolve); ok && r.Action == fsm.ResolveNotStarted {
		w.mu.Lock()
		err := w.errs[min(w.attempts, len(w.errs)-1)]
		w.attempts++
		w.mu.Unlock()
		if err != nil {
			if w.applied {
				_, _ = w.fsmWriter.Apply(ctx, cmd)
			}
			return fsm.Result{}, err
		}
	}
	return w.fsmWriter.Apply(ctx, cmd)
}

// A weight update the fleet did not acknowledge sends nothing and closes its record as not
// started. When that close fails (the coordinator had just been drained and
// found no leader, say), the answer must not claim the targets are enabled again: the record stays
// open with its targets disabled, and the answer names it and how to resolve it. A close whose
// outcome is unknown says so. A close refused for want of a leader is retried within a bound.
func TestUpdateNotStartedCloseFails(t *testing.T) {
	unknown := fmt.Errorf("%w: %w", consensus.ErrOutcomeUnknown, context.DeadlineExceeded)
	tests := []struct {
		name     string
		errs     []error
		applied  bool
		result   string
		open     bool // the record stays open, its targets disabled
		attempts int  // 0: more than one
		says     []string
	}{
		{"no leader throughout", []error{consensus.ErrNoLeader}, false, "unresolved", true, 0,
			[]string{"stays open", "disabled", "meshctl journal resolve", "meshctl workers enable", "nothing was sent"}},
		{"not the leader throughout", []error{&consensus.NotLeaderError{Leader: "n2"}}, false, "unresolved", true, 0,
			[]string{"stays open", "disabled"}},
		{"a leader returns", []error{consensus.ErrNoLeader, consensus.ErrNoLeader, nil}, false, "not_started", false, 3,
			[]string{"enabled again"}},
		{"outcome unknown, not applied", []error{unknown}, false, "outcome_unknown", true, 1,
			[]string{"may or may not", "meshctl journal show", "meshctl journal resolve"}},
		{"outcome unknown, applied", []error{unknown}, true, "outcome_unknown", false, 1,
			[]string{"may or may not"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, fw, ids := setup(t, []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}, []string{"n5"})
				w := &closeFails{fsmWriter: fw, errs: tt.errs, applied: tt.applied}
				c.cfg.Writer = w
				start := time.Now()
				rep, err := c.Update(context.Background(), []byte(`{"model_path": "/m"}`), Target{})
				if err != nil {
					t.Fatalf("update: %v", err)
				}
				if took := time.Since(start); took > closeBound {
					t.Errorf("the answer took %v, over the bound %v", took, closeBound)
				}
				if rep.Result != tt.result || rep.Success {
					t.Fatalf("result %q (success %v), want %q: %s", rep.Result, rep.Success, tt.result, rep.Message)
				}
				if rep.Result != "not_started" && strings.Contains(rep.Message, "enabled again") {
					t.Errorf("the message claims the targets are enabled again: %s", rep.Message)
				}
				for _, s := range append(tt.says, rep.ID) {
					if !strings.Contains(rep.Message, s) {
						t.Errorf("the message does not say %q: %s", s, rep.Message)
					}
				}
				if got := len(fw.f.Journal()) == 1; got != tt.open {
					t.Errorf("record open %v, want %v: %+v", got, tt.open, fw.f.Journal())
				}
				for _, id := range ids {
					if r, _ := fw.f.Worker(id); r.Disabled != tt.open {
						t.Errorf("%s disabled %v, want %v", id, r.Disabled, tt.open)
					}
				}
				switch {
				case tt.attempts == 0 && w.attempts < 2:
					t.Errorf("%d attempts to close, want retries", w.attempts)
				case tt.attempts > 0 && w.attempts != tt.attempts:
					t.Errorf("%d attempts to close, want %d", w.attempts, tt.attempts)
				}
			})
		})
	}
}
