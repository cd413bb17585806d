package consensus

import (
	"cmp"
	"context"
	"log/slog"
	"time"
)

// Bounds of CatchUp.
const (
	// DefaultCatchUpPoll is how often CatchUp looks again without a signal, and waits after a
	// barrier that failed.
	DefaultCatchUpPoll = 250 * time.Millisecond
	// catchUpAttempt bounds one barrier: a leader that does not answer within it is asked again
	// (or its successor is).
	catchUpAttempt = 5 * time.Second
)

// CatchUpNode is what CatchUp needs of the raft node; *Node implements it.
type CatchUpNode interface {
	// Info gives the leader.
	Info() (Info, error)
	// Watch signals, coalesced, after the applied state changed.
	Watch() (<-chan struct{}, func())
}

// CatchUp tells when a follower is caught up: a leader answered its commit index (its read
// index, confirmed by a quorum) and this node applied up to it. It asks the leader rather than
// reading gossip, which may be stale or forged by a peer that lost its state. Until then a
// gateway keeps the state raft restored (fail-static), and a rejoining node votes for nobody. A
// leader is current once raft's Barrier returned, which is the leader loop's business, not
// CatchUp's. The zero value of every optional field is its default.
type CatchUp struct {
	// Self is this node's id. Required.
	Self string
	// Node is the raft node. Required.
	Node CatchUpNode
	// Barrier asks the leader its read index and waits until this node applied it
	// (Node.ReadBarrier; fleetack.FleetAck.Barrier over its connections). Required.
	Barrier func(ctx context.Context) error
	// Poll backs up the node's signals. Zero means DefaultCatchUpPoll.
	Poll time.Duration
	// After is the clock's timer. Nil means time.After.
	After func(time.Duration) <-chan time.Time
	// Logger receives a line when a leader is first heard from. Nil means slog.Default().
	Logger *slog.Logger
}

// Wait returns the leader's id once this node, a follower, applied the commit index a leader
// answered, and false if ctx ended first.
func (c CatchUp) Wait(ctx context.Context) (leader string, ok bool) {
	log := cmp.Or(c.Logger, slog.Default())
	signals, stop := c.Node.Watch()
	defer stop()
	heard := ""
	for {
		if info, err := c.Node.Info(); err == nil && info.Leader != "" && info.Leader != c.Self {
			if heard == "" {
				heard = info.Leader
				log.Info("following the raft leader; catching up", "leader", heard, "applied_index", info.AppliedIndex)
			}
			actx, cancel := context.WithTimeout(ctx, catchUpAttempt)
			err := c.Barrier(actx)
			cancel()
			if err == nil {
				return info.Leader, true
			}
			log.Debug("the leader's commit index is not applied yet", "leader", info.Leader, "err", err)
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-signals:
		case <-after(c.After, cmp.Or(c.Poll, DefaultCatchUpPoll)):
		}
	}
}
