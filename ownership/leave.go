package ownership

import (
	"context"
	"log/slog"
	"time"

	"github.com/meshgw/meshgw/mesh"
)

// Leaver is what LeaveOnTerminate needs of the Operator.
type Leaver interface {
	Peers() []Peer
	Drain(ctx context.Context, peers []string) (Outcome, error)
}

// Left is how LeaveOnTerminate ended.
type Left int

const (
	// LeftAlone: no other alive gateway that is not draining takes the workers, so the gateway
	// stops without a drain (a quick restart comes back as the owner).
	LeftAlone Left = iota
	// LeftNotApplied: the drain was refused, or not applied within the timeout.
	LeftNotApplied
	// LeftDrained: the drain applied and the drain duty left the mesh.
	LeftDrained
	// LeftTimedOut: the drain applied but the gateway had not left the mesh within the timeout.
	LeftTimedOut
)

// LeaveOnTerminate drains a gateway that is stopping (meshgw's --leave-on-terminate), as POST
// /mesh/drain {"peer": self} does, and waits until its drain duty left the mesh.
type LeaveOnTerminate struct {
	// Self is this gateway's node id.
	Self string
	// Operator drains Self.
	Operator Leaver
	// Gateway's readiness is withdrawn first, whatever follows.
	Gateway interface{ WithdrawReadiness() }
	// Retryable says whether a drain that failed with err may be tried again (no leader yet, a
	// lost leader, an unknown outcome).
	Retryable func(err error) bool
	// States describes Self's drain for the log when the wait times out; nil logs nothing.
	States func() any
	Logger *slog.Logger
}

// Run withdraws the gateway's readiness, then drains Self unless no other gateway can take its
// workers, retrying a retryable failure with a backoff of 100 ms doubling to 2 s, and waits
// until left is closed; all within timeout.
func (l LeaveOnTerminate) Run(left <-chan struct{}, timeout time.Duration) Left {
	log := l.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l.Gateway.WithdrawReadiness()
	others := 0
	for _, p := range l.Operator.Peers() {
		if p.ID != l.Self && p.Status == mesh.StatusAlive && !p.Draining {
			others++
		}
	}
	if others == 0 {
		log.Warn("--leave-on-terminate: no other alive gateway takes the workers; stopping without a drain")
		return LeftAlone
	}
	log.Info("--leave-on-terminate: draining this gateway before it stops", "timeout", timeout)
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		out, err := l.Operator.Drain(ctx, []string{l.Self})
		if err == nil {
			log.Info("--leave-on-terminate: workers handed off", "moved", len(out.Moved), "stuck", len(out.Stuck))
			break
		}
		if l.Retryable == nil || !l.Retryable(err) || ctx.Err() != nil {
			log.Warn("--leave-on-terminate: the drain did not apply; stopping with this gateway's workers", "err", err)
			return LeftNotApplied
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	select {
	case <-left:
		log.Info("--leave-on-terminate: drained and left the mesh")
		return LeftDrained
	case <-ctx.Done():
		var states any
		if l.States != nil {
			states = l.States()
		}
		log.Warn("--leave-on-terminate: the drain did not finish in time", "left", states)
		return LeftTimedOut
	}
}
