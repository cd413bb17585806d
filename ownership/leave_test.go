package ownership

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/testkit"
)

// leaver is a Leaver whose drains fail with errs in turn, then succeed; it records when each
// drain came.
type leaver struct {
	peers []Peer
	errs  []error
	at    []time.Time
}

func (l *leaver) Peers() []Peer { return l.peers }

func (l *leaver) Drain(_ context.Context, peers []string) (Outcome, error) {
	l.at = append(l.at, time.Now())
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		return Outcome{}, err
	}
	return Outcome{}, nil
}

type readiness struct{ withdrawn bool }

func (r *readiness) WithdrawReadiness() { r.withdrawn = true }

var (
	errRetry = errors.New("no leader yet")
	errFinal = errors.New("refused")
)

func TestLeaveOnTerminate(t *testing.T) {
	alive := []Peer{{ID: "self", Status: mesh.StatusAlive}, {ID: "other", Status: mesh.StatusAlive}}
	tests := []struct {
		name   string
		peers  []Peer
		errs   []error
		left   bool // the drain duty leaves the mesh once drained
		want   Left
		drains int
	}{
		{"alone", []Peer{{ID: "self", Status: mesh.StatusAlive}}, nil, true, LeftAlone, 0},
		{"the only other is draining", []Peer{alive[0], {ID: "other", Status: mesh.StatusAlive, Draining: true}}, nil, true, LeftAlone, 0},
		{"the only other is dead", []Peer{alive[0], {ID: "other", Status: mesh.StatusDead}}, nil, true, LeftAlone, 0},
		{"drained and left", alive, nil, true, LeftDrained, 1},
		{"retried with a backoff, then left", alive, []error{errRetry, errRetry, errRetry}, true, LeftDrained, 4},
		{"refused", alive, []error{errRetry, errFinal}, true, LeftNotApplied, 2},
		{"drained, never left", alive, nil, false, LeftTimedOut, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				op := &leaver{peers: tt.peers, errs: tt.errs}
				gw := &readiness{}
				left := make(chan struct{})
				if tt.left {
					close(left)
				}
				start := time.Now()
				got := LeaveOnTerminate{Self: "self", Operator: op, Gateway: gw, Logger: testkit.Quiet(),
					Retryable: func(err error) bool { return errors.Is(err, errRetry) },
					States:    func() any { return "pending" }}.Run(left, 10*time.Second)
				if got != tt.want || len(op.at) != tt.drains || !gw.withdrawn {
					t.Fatalf("Run = %v after %d drains, readiness withdrawn %v; want %v after %d, withdrawn",
						got, len(op.at), gw.withdrawn, tt.want, tt.drains)
				}
				for i := 1; i < len(op.at); i++ {
					if wait, want := op.at[i].Sub(op.at[i-1]), 100*time.Millisecond<<(i-1); wait != want {
						t.Errorf("drain %d came %v after the one before; want %v", i+1, wait, want)
					}
				}
				if tt.want == LeftTimedOut && time.Since(start) != 10*time.Second {
					t.Errorf("gave up after %v; want the timeout, 10s", time.Since(start))
				}
			})
		})
	}
}

// TestLeaveOnTerminateRetriesWithinTheTimeout: a drain that keeps failing retryably stops at the
// timeout, its backoff capped at 2 s.
func TestLeaveOnTerminateRetriesWithinTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errs := make([]error, 100)
		for i := range errs {
			errs[i] = errRetry
		}
		op := &leaver{peers: []Peer{{ID: "self", Status: mesh.StatusAlive}, {ID: "other", Status: mesh.StatusAlive}}, errs: errs}
		start := time.Now()
		got := LeaveOnTerminate{Self: "self", Operator: op, Gateway: &readiness{}, Logger: testkit.Quiet(),
			Retryable: func(err error) bool { return errors.Is(err, errRetry) || errors.Is(err, context.DeadlineExceeded) }}.
			Run(make(chan struct{}), 10*time.Second)
		if got != LeftNotApplied || time.Since(start) != 10*time.Second {
			t.Fatalf("Run = %v after %v; want LeftNotApplied at the timeout, 10s", got, time.Since(start))
		}
		// Drains at 0, 0.1, 0.3, 0.7, 1.5, 3.1, 5.1, 7.1 and 9.1 s (the backoff doubles from 100 ms
		// to 2 s), and a tenth at the timeout, with its context done.
		if len(op.at) != 10 || op.at[9].Sub(start) != 10*time.Second {
			t.Errorf("%d drains in 10 s, the last %v after the start; want 10, the last at 10s", len(op.at), op.at[len(op.at)-1].Sub(start))
		}
	})
}
