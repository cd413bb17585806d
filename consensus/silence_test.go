package consensus

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/test/testkit"
)

// TestLeaderSilence: a leader is never cut off; a node that hears from no leader (it waits to
// be added by a --join that never comes) is, once the silence passes the limit, and says so
// with a NoQuorumError that counts as ErrNoLeader.
func TestLeaderSilence(t *testing.T) {
	leader := startNode(t, Config{NodeID: "a", Ephemeral: true, BindAddr: "127.0.0.1:0"})
	waitReady(t, leader)
	if s, cut := leader.LeaderSilence(); cut || s != 0 {
		t.Errorf("the leader's LeaderSilence is %s, %t; want 0, false", s, cut)
	}
	if err := leader.CutOff(); err != nil {
		t.Errorf("the leader's CutOff: %v", err)
	}

	alone := startNode(t, Config{NodeID: "b", Ephemeral: true, BindAddr: "127.0.0.1:0", Join: []string{"127.0.0.1:1"}})
	if _, cut := alone.LeaderSilence(); cut {
		t.Fatal("a node that started a moment ago is cut off; want the limit to count from its start")
	}
	testkit.For(t, "the node without a leader to be cut off", func() bool { return alone.CutOff() != nil })
	err := alone.CutOff()
	var nq *NoQuorumError
	if !errors.As(err, &nq) || !errors.Is(err, ErrNoLeader) || nq.Silence < minSilenceLimit {
		t.Errorf("CutOff: %v (%#v); want a NoQuorumError of at least %s that is ErrNoLeader", err, nq, minSilenceLimit)
	}
}

// TestUntilCutOff: the context ends, with the verdict as its cause, at the first poll that
// finds the node cut off (at once when it already is); stop ends a watch that found nothing,
// without a cause.
func TestUntilCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cut := &NoQuorumError{Silence: time.Second}
		start := time.Now()
		after := start.Add(120 * time.Millisecond)
		verdict := func() error {
			if time.Now().Before(after) {
				return nil
			}
			return cut
		}
		wctx, stop := UntilCutOff(context.Background(), 50*time.Millisecond, verdict)
		<-wctx.Done()
		stop()
		if got := time.Since(start); got != 150*time.Millisecond {
			t.Errorf("the watch ended after %v; want at the first poll past the cut, 150ms", got)
		}
		var nq *NoQuorumError
		if !errors.As(context.Cause(wctx), &nq) || nq != cut {
			t.Errorf("cause %v; want the verdict", context.Cause(wctx))
		}

		wctx, stop = UntilCutOff(context.Background(), 50*time.Millisecond, verdict)
		if !errors.As(context.Cause(wctx), &nq) {
			t.Errorf("a node already cut off: cause %v; want the verdict at once", context.Cause(wctx))
		}
		stop()

		after = time.Now().Add(time.Hour)
		wctx, stop = UntilCutOff(context.Background(), 50*time.Millisecond, verdict)
		testkit.Advance(time.Second)
		stop()
		if errors.As(context.Cause(wctx), &nq) {
			t.Errorf("a watch that found nothing ended with %v", context.Cause(wctx))
		}
	})
}
