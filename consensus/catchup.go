package consensus

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/meshgw/meshgw/mesh"
)

// DefaultCatchUpPoll is how often CatchUp looks again without a signal.
const DefaultCatchUpPoll = 250 * time.Millisecond

// CatchUpNode is what CatchUp needs of the raft node; *Node implements it.
type CatchUpNode interface {
	// Info gives the leader and the applied index of the FSM.
	Info() (Info, error)
	// Progress gives raft's commit and applied indexes.
	Progress() (commit, applied uint64)
	// Watch signals, coalesced, after the applied state changed.
	Watch() (<-chan struct{}, func())
}

// CatchUp tells when a follower is caught up: it has applied what the leader had when this node
// first heard from it, that is the commit index raft then knew and the applied index the leader
// published in its mesh metadata. Until then a gateway keeps the state raft restored
// (fail-static). A leader is current once raft's Barrier returned, which is the leader loop's
// business, not CatchUp's. The zero value of every optional field is its default.
type CatchUp struct {
	// Self is this node's id. Required.
	Self string
	// Node is the raft node. Required.
	Node CatchUpNode
	// Members is the mesh, for the leader's published applied index. Required.
	Members MemberList
	// Poll backs up the node's and the mesh's signals. Zero means DefaultCatchUpPoll.
	Poll time.Duration
	// After is the clock's timer. Nil means time.After.
	After func(time.Duration) <-chan time.Time
	// Logger receives a line when the leader is first heard from. Nil means slog.Default().
	Logger *slog.Logger
}

// Wait returns the leader's id once this node, a follower, caught up with it, and false if ctx
// ended first. The targets are taken once, when a leader other than Self is first known while
// the mesh shows it alive; they do not move afterwards, even if the leader changes.
func (c CatchUp) Wait(ctx context.Context) (leader string, ok bool) {
	nodeSignals, stopNode := c.Node.Watch()
	defer stopNode()
	meshSignals, stopMesh := c.Members.Watch()
	defer stopMesh()
	var commit, published uint64
	for {
		if info, err := c.Node.Info(); err == nil && info.Leader != "" && info.Leader != c.Self {
			if m, found := member(c.Members.Members(), info.Leader); leader == "" && found && m.Status == mesh.StatusAlive {
				leader, published = info.Leader, m.Meta.AppliedIndex
				commit, _ = c.Node.Progress()
				cmp.Or(c.Logger, slog.Default()).Info("following the raft leader; catching up", "leader", leader,
					"commit_index", commit, "leader_applied_index", published, "applied_index", info.AppliedIndex)
			}
			if _, applied := c.Node.Progress(); leader != "" && applied >= commit && info.AppliedIndex >= published {
				return leader, true
			}
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-nodeSignals:
		case <-meshSignals:
		case <-after(c.After, cmp.Or(c.Poll, DefaultCatchUpPoll)):
		}
	}
}

// member is the member of id among members.
func member(members []mesh.Member, id string) (mesh.Member, bool) {
	for _, m := range members {
		if m.ID == id {
			return m, true
		}
	}
	return mesh.Member{}, false
}
