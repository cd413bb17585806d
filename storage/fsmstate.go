package storage

import (
	"bytes"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// The applied state of the raft FSM, kept beside raft's log in the same bbolt file, so that a
// gateway that starts serves its last applied records at once, before any leader exists (as etcd
// keeps its backend beside its WAL). The bytes are the FSM's own encoding; this file only stores
// them.
var (
	bucketFSMRecords = []byte("fsm_records") // record key -> encoded record
	bucketFSMMeta    = []byte("fsm_meta")    // keyFSMMeta -> encoded state without records
	keyFSMMeta       = []byte("state")
)

// FSMDelta is one save of the FSM's applied state: the state's meta (cluster id, applied index,
// journal: whatever the FSM puts there), the records changed since the last save and the ones
// removed. Full replaces every stored record with Puts.
type FSMDelta struct {
	Meta []byte
	Puts []KV
	Dels [][]byte
	Full bool
}

// KV is one stored record.
type KV struct{ Key, Value []byte }

// SaveFSM stores d in one transaction (one fsync): the meta and the records together, so a crash
// leaves either the old save or the new one. It sorts d.Puts by key: bbolt splits a page only
// at commit, so the keys a transaction puts in one page are inserted into one sorted slice,
// and keys in random order (a full save after a restore puts every record in one new bucket)
// cost a move of half that slice each, quadratic in the records; in order, each is appended.
func (s *Store) SaveFSM(d FSMDelta) error {
	slices.SortFunc(d.Puts, func(a, b KV) int { return bytes.Compare(a.Key, b.Key) })
	err := s.db.Update(func(tx *bolt.Tx) error {
		if d.Full {
			if err := tx.DeleteBucket(bucketFSMRecords); err != nil && tx.Bucket(bucketFSMRecords) != nil {
				return err
			}
		}
		recs, err := tx.CreateBucketIfNotExists(bucketFSMRecords)
		if err != nil {
			return err
		}
		for _, kv := range d.Puts {
			if err := recs.Put(kv.Key, kv.Value); err != nil {
				return err
			}
		}
		for _, k := range d.Dels {
			if err := recs.Delete(k); err != nil {
				return err
			}
		}
		meta, err := tx.CreateBucketIfNotExists(bucketFSMMeta)
		if err != nil {
			return err
		}
		return meta.Put(keyFSMMeta, d.Meta)
	})
	if err != nil {
		return fmt.Errorf("save the applied state in %s: %w", s.path, err)
	}
	return nil
}

// LoadFSM reads what SaveFSM stored: the meta (nil when nothing was ever saved) and each record,
// handed to each in key order. The slices are valid only during the call; each must copy what
// it keeps.
func (s *Store) LoadFSM(each func(key, value []byte) error) (meta []byte, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		mb := tx.Bucket(bucketFSMMeta)
		if mb == nil {
			return nil
		}
		if v := mb.Get(keyFSMMeta); v != nil {
			meta = append([]byte(nil), v...)
		}
		recs := tx.Bucket(bucketFSMRecords)
		if meta == nil || recs == nil {
			return nil
		}
		return recs.ForEach(each)
	})
	if err != nil {
		return nil, fmt.Errorf("load the applied state from %s: %w", s.path, err)
	}
	return meta, nil
}
