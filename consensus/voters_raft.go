package consensus

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// configuration returns the latest raft configuration (committed or not) and its index, which
// changeMembership takes as prevIndex so that a change planned on a stale view is refused.
func (n *Node) configuration() (raft.Configuration, uint64, error) {
	if n.closed.Load() {
		return raft.Configuration{}, 0, ErrShutdown
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, 0, fmt.Errorf("consensus: read configuration: %w", err)
	}
	return f.Configuration(), f.Index(), nil
}

// changeMembership hands c to raft. timeout bounds only the hand-over; the returned future
// resolves once the configuration entry commits, leadership is lost or raft shuts down.
func (n *Node) changeMembership(c Change, prevIndex uint64, timeout time.Duration) raft.IndexFuture {
	id, addr := raft.ServerID(c.ID), raft.ServerAddress(c.Address)
	switch c.Kind {
	case ChangeAddNonvoter:
		return n.raft.AddNonvoter(id, addr, prevIndex, timeout)
	case ChangePromote:
		return n.raft.AddVoter(id, addr, prevIndex, timeout)
	case ChangeDemote:
		return n.raft.DemoteVoter(id, prevIndex, timeout)
	case ChangeRemove:
		return n.raft.RemoveServer(id, prevIndex, timeout)
	case ChangeUpdateAddress:
		if c.Voter {
			return n.raft.AddVoter(id, addr, prevIndex, timeout)
		}
		return n.raft.AddNonvoter(id, addr, prevIndex, timeout)
	case ChangeTransferLeadership:
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
