package consensus

import (
	"errors"

	"github.com/hashicorp/raft"
)

// trackedLogs is raft's log store: the in-memory cache in front of bbolt, declared a
// raft.CommitTrackingLogStore so that raft stages its commit index with every append
// (Config.RestoreCommittedLogs) and the store keeps it in the append's transaction.
type trackedLogs struct {
	*raft.LogCache
	tracker commitTracker
}

// commitTracker is the bbolt store's side of raft.CommitTrackingLogStore.
type commitTracker interface {
	StageCommitIndex(idx uint64) error
}

var _ raft.CommitTrackingLogStore = trackedLogs{}

func (t trackedLogs) StageCommitIndex(idx uint64) error { return t.tracker.StageCommitIndex(idx) }

// GetCommitIndex tells raft there is nothing to replay at start: the node has already applied
// the committed entries itself (replayCommitted), straight into the FSM. raft's own replay
// would queue them to its FSM goroutine, which starts only after NewRaft returns (and blocks
// NewRaft once more than 128 batches wait), so the gateway would not serve them at once.
func (trackedLogs) GetCommitIndex() (uint64, error) { return 0, nil }

// replayCommitted applies the log entries the stored commit index covers that the loaded state
// lacks, before raft starts: an entry a follower acknowledged but had not saved yet (a crash
// right after the acknowledgement) is served from the first request after the restart, with no
// leader. It runs only when raft will not restore a snapshot over the FSM. An entry missing from
// the log ends the replay; raft then brings the rest once a leader exists.
func (n *Node) replayCommitted() {
	db := n.stores.db
	if db == nil {
		return
	}
	last, err := db.LastIndex()
	if err != nil {
		n.log.Error("cannot read the raft log to apply its committed entries at start", "err", err)
		return
	}
	from, to := n.fsm.AppliedIndex()+1, min(db.CommitIndex(), last)
	applied := 0
	for i := from; i <= to; i++ {
		var l raft.Log
		if err := db.GetLog(i, &l); err != nil {
			if !errors.Is(err, raft.ErrLogNotFound) {
				n.log.Error("cannot read a committed log entry at start; raft applies the rest once a leader exists", "index", i, "err", err)
			}
			break
		}
		if l.Type == raft.LogCommand {
			n.fsm.Apply(&l)
		}
		applied++
	}
	if applied > 0 {
		n.log.Info("applied the committed log entries the saved state lacked", "from", from, "to", from+uint64(applied)-1,
			"workers", n.fsm.Len())
	}
}
