package consensus

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/voters"
)

// Configuration returns the latest raft configuration (committed or not) and its index, which
// ChangeMembership takes as prevIndex so that a change planned on a stale view is refused
// (voters.Raft). Once the node is shut down the error wraps ErrShutdown and raft.ErrRaftShutdown.
func (n *Node) Configuration() (raft.Configuration, uint64, error) {
	if n.closed.Load() {
		return raft.Configuration{}, 0, fmt.Errorf("%w (%w)", ErrShutdown, raft.ErrRaftShutdown)
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, 0, fmt.Errorf("consensus: read configuration: %w", err)
	}
	return f.Configuration(), f.Index(), nil
}

// ChangeMembership hands c, a step of a voters.Plan, to raft (voters.Raft), refused unless the
// configuration is still at prevIndex. timeout bounds only the hand-over; the returned future
// resolves once the configuration entry commits, leadership is lost or raft shuts down.
func (n *Node) ChangeMembership(c voters.Change, prevIndex uint64, timeout time.Duration) raft.IndexFuture {
	id, addr := raft.ServerID(c.ID), raft.ServerAddress(c.Address)
	switch c.Kind {
	case voters.ChangeAddNonvoter:
		return n.raft.AddNonvoter(id, addr, prevIndex, timeout)
	case voters.ChangePromote:
		return n.raft.AddVoter(id, addr, prevIndex, timeout)
	case voters.ChangeDemote:
		return n.raft.DemoteVoter(id, prevIndex, timeout)
	case voters.ChangeRemove:
		return n.raft.RemoveServer(id, prevIndex, timeout)
	case voters.ChangeUpdateAddress:
		if c.Voter {
			return n.raft.AddVoter(id, addr, prevIndex, timeout)
		}
		return n.raft.AddNonvoter(id, addr, prevIndex, timeout)
	case voters.ChangeTransferLeadership:
		return handedOver{n.raft.LeadershipTransferToServer(id, addr), prevIndex}
	}
	return failedFuture{fmt.Errorf("consensus: unknown membership change %d", c.Kind)}
}

// handedOver is the future of a leadership transfer: it changes no configuration, so its index
// is the one the change was planned on.
type handedOver struct {
	raft.Future
	index uint64
}

func (h handedOver) Index() uint64 { return h.index }

// failedFuture is a raft.IndexFuture that has already failed.
type failedFuture struct{ err error }

func (f failedFuture) Error() error  { return f.err }
func (f failedFuture) Index() uint64 { return 0 }
