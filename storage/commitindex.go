package storage

import (
	"encoding/binary"
	"fmt"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// keyCommitIndex, in the node bucket, is the highest raft commit index this node learned and
// stored with its log (StageCommitIndex): every entry up to it is committed and in the log.
var keyCommitIndex = []byte("commit_index")

// StageCommitIndex implements the first half of raft.CommitTrackingLogStore: it remembers idx,
// and the next StoreLogs writes it in the same transaction as its entries. raft stages the
// commit index it knows before each append (the leader's, or min(the leader's, the last new
// entry) on a follower), so the stored value never exceeds the log it was stored with.
func (s *Store) StageCommitIndex(idx uint64) error {
	s.staged.Store(idx)
	return nil
}

// GetCommitIndex implements raft.CommitTrackingLogStore: the commit index stored with the log.
func (s *Store) GetCommitIndex() (uint64, error) { return s.commit.Load(), nil }

// CommitIndex is the commit index stored with the log: entries up to it (and up to the last
// index) are committed and on disk, so a restart can apply them before any leader exists.
func (s *Store) CommitIndex() uint64 { return s.commit.Load() }

// CommitWatch returns a channel closed the next time the stored commit index grows.
func (s *Store) CommitWatch() <-chan struct{} { return *s.commitSig.Load() }

// putStagedCommit writes the staged commit index, when it is above the stored one, in tx; it
// returns the index a successful commit of tx makes durable (0: nothing new).
func (s *Store) putStagedCommit(tx *bolt.Tx) (uint64, error) {
	idx := s.staged.Load()
	if idx <= s.commit.Load() {
		return 0, nil
	}
	if err := tx.Bucket(bucketNode).Put(keyCommitIndex, binary.BigEndian.AppendUint64(nil, idx)); err != nil {
		return 0, fmt.Errorf("store commit index %d: %w", idx, err)
	}
	return idx, nil
}

// committed publishes a commit index a transaction made durable.
func (s *Store) committed(idx uint64) {
	if idx <= s.commit.Load() {
		return
	}
	s.commit.Store(idx)
	next := make(chan struct{})
	close(*s.commitSig.Swap(&next))
}

// loadCommit reads the stored commit index at open.
func (s *Store) loadCommit(tx *bolt.Tx) error {
	sig := make(chan struct{})
	s.commitSig.Store(&sig)
	v := tx.Bucket(bucketNode).Get(keyCommitIndex)
	if v == nil {
		return nil
	}
	if len(v) != 8 {
		return fmt.Errorf("the stored commit index holds %d bytes, not 8", len(v))
	}
	s.commit.Store(binary.BigEndian.Uint64(v))
	return nil
}

var _ raft.CommitTrackingLogStore = (*Store)(nil)

// SaveCommit stores index as the commit index, when it is above the stored one and the log
// holds an entry at index of the given term, and reports whether it did. Its caller knows that
// entry committed (it applied it, or the leader said so): by raft's log matching, a log with an
// entry of the same index and term holds the same entries up to it, all committed. The check
// and the write share one transaction, so no append or truncation slips between. It lets a node
// make its commit index durable without waiting for raft's next append to carry it.
func (s *Store) SaveCommit(index, term uint64) (bool, error) {
	if index <= s.commit.Load() {
		return false, nil
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	saved := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLogs).Get(indexKey(index))
		if v == nil {
			return nil
		}
		var l raft.Log
		if err := decodeLog(index, v, &l); err != nil {
			return err
		}
		if l.Term != term || index <= s.commit.Load() {
			return nil
		}
		if err := tx.Bucket(bucketNode).Put(keyCommitIndex, binary.BigEndian.AppendUint64(nil, index)); err != nil {
			return fmt.Errorf("store commit index %d: %w", index, err)
		}
		saved = true
		return nil
	})
	if err != nil || !saved {
		return false, err
	}
	s.committed(index)
	return true, nil
}
