package mesh

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"
)

// DefaultProgressInterval is the most often a ProgressPublisher gossips this node's metadata
// again.
const DefaultProgressInterval = 250 * time.Millisecond

// Progress is the part of this node's metadata that follows its raft state and its pool.
type Progress struct {
	// AppliedIndex is Meta.AppliedIndex: the raft index this node applied.
	AppliedIndex uint64
	// ClusterID is Meta.ClusterID: the raft cluster id, "" until raft knows it.
	ClusterID string
	// OwnedWorkers is Meta.OwnedWorkers: how many workers this node owns.
	OwnedWorkers uint32
	// Rejoining is Meta.Rejoining: the node's raft state is new and not yet confirmed caught up.
	Rejoining bool
}

// progressOf is the Progress a Meta carries.
func progressOf(m Meta) Progress {
	return Progress{AppliedIndex: m.AppliedIndex, ClusterID: m.ClusterID, OwnedWorkers: m.OwnedWorkers, Rejoining: m.Rejoining}
}

// MetaSetter is the node's own metadata as a ProgressPublisher changes it; *Mesh implements it.
type MetaSetter interface {
	// Local returns the metadata this node publishes.
	Local() Meta
	// SetMeta changes it with f and gossips it.
	SetMeta(f func(*Meta)) error
}

// ProgressPublisher gossips this node's Progress when it changed, at most every Interval unless
// told it is urgent: it reads Progress at the start, every Interval and on Urgent, and calls
// SetMeta only when the value differs from the metadata published. It polls rather than
// follows raft's signal: the owned count follows the pool, which has none, and a read is
// cheap. The zero value of every optional field
// is its default.
type ProgressPublisher struct {
	// Mesh is where the metadata goes. Required.
	Mesh MetaSetter
	// Progress returns the current values. Required.
	Progress func() Progress
	// Interval is the time between two reads of Progress. Zero means DefaultProgressInterval.
	Interval time.Duration
	// After is the clock's timer. Nil means time.After.
	After func(time.Duration) <-chan time.Time
	// Urgent receives when a change must not wait for the interval: the end of rejoining, for
	// which the raft leader waits before it promotes this node to voter. Run reads and
	// publishes at once then. Nil: every Interval only.
	Urgent <-chan struct{}
	// Logger receives a line when gossiping fails. Nil means slog.Default().
	Logger *slog.Logger
}

// Run publishes until ctx ends.
func (p ProgressPublisher) Run(ctx context.Context) {
	interval, after := cmp.Or(p.Interval, DefaultProgressInterval), p.After
	if after == nil {
		after = time.After
	}
	for {
		p.publish()
		select {
		case <-ctx.Done():
			return
		case <-after(interval):
		case <-p.Urgent:
		}
	}
}

// publish gossips Progress if it differs from what the metadata carries.
func (p ProgressPublisher) publish() {
	cur := p.Progress()
	if progressOf(p.Mesh.Local()) == cur {
		return
	}
	err := p.Mesh.SetMeta(func(m *Meta) {
		m.AppliedIndex, m.ClusterID, m.OwnedWorkers, m.Rejoining = cur.AppliedIndex, cur.ClusterID, cur.OwnedWorkers, cur.Rejoining
	})
	if err != nil && !errors.Is(err, ErrLeft) && !errors.Is(err, ErrShutdown) {
		cmp.Or(p.Logger, slog.Default()).Warn("gossiping this node's metadata failed", "err", err)
	}
}
