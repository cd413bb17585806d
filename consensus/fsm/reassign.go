package fsm

import (
	"google.golang.org/protobuf/proto"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/worker"
)

// Reassign is the batch ownership reassignment of failover: it moves many workers in one raft
// entry. Each item applies only while its record still has the item's From owner and epoch (the
// fence); an item whose fence no longer holds, or whose record is gone, is skipped and reported
// in Result.Reassign, and the others apply. Every moved record gets the owner To and the epoch
// of the entry's index.
type Reassign struct {
	Items []ReassignItem
}

// ReassignItem moves one worker from the owner and epoch the proposer read to To.
type ReassignItem struct {
	ID   worker.ID
	From Fence
	To   string
}

// ReassignResult says what a Reassign entry did, in the order of its items.
type ReassignResult struct {
	// Moved are the ids whose owner became the item's To.
	Moved []worker.ID
	// Skipped are the items that did not apply, with the reason.
	Skipped []ReassignSkip
}

// ReassignSkip is an item of a Reassign that did not apply.
type ReassignSkip struct {
	ID worker.ID
	// Reason is "not found", or the fence that no longer holds ("fenced: owner ... at epoch ...").
	Reason string
}

// Type implements Command.
func (Reassign) Type() CommandType { return TypeReassign }

func (c Reassign) message() proto.Message {
	m := &consensusv1.ReassignCommand{Items: make([]*consensusv1.ReassignItem, len(c.Items))}
	for i, it := range c.Items {
		m.Items[i] = &consensusv1.ReassignItem{
			Id:            string(it.ID),
			ExpectedOwner: it.From.Owner,
			ExpectedEpoch: it.From.Epoch,
			To:            it.To,
		}
	}
	return m
}

// applyReassign moves each item whose fence holds (moveItems). An item with an empty id, owner
// or target makes the whole entry invalid (the proposer validates first; this is the last
// defence), so that a batch applies as a whole or not at all for malformed input. The outcome is
// Updated when at least one record moved, else Unchanged.
func applyReassign(s *state, index uint64, m *consensusv1.ReassignCommand) Result {
	if res, ok := checkItems(m.Items); !ok {
		return res
	}
	return moveItems(s, index, m.Items, nil)
}
