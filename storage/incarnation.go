package storage

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// bucketNode holds facts about this copy of the node's state, not raft's: its incarnation and
// whether it is still rejoining.
var bucketNode = []byte("node")

var (
	keyIncarnation = []byte("incarnation")
	keyRejoining   = []byte("rejoining")
)

// incarnationBytes is the size of the random id; printed in hex it is twice as long.
const incarnationBytes = 8

// initNode makes the node bucket and, on first use of the file, its incarnation.
func (s *Store) initNode(tx *bolt.Tx) error {
	b, err := tx.CreateBucketIfNotExists(bucketNode)
	if err != nil {
		return err
	}
	if v := b.Get(keyIncarnation); v != nil {
		s.incarnation = string(v)
		return nil
	}
	id, err := NewIncarnation()
	if err != nil {
		return err
	}
	s.incarnation = id
	return b.Put(keyIncarnation, []byte(s.incarnation))
}

// NewIncarnation makes a random incarnation id: what a new database gets, and what an
// ephemeral node (no database) takes at each start.
func NewIncarnation() (string, error) {
	var id [incarnationBytes]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", fmt.Errorf("make an incarnation id: %w", err)
	}
	return hex.EncodeToString(id[:]), nil
}

// Incarnation is the random id made when this database was first opened: a state directory
// that was lost and made again has a new one. Peers compare it to tell a restart, which keeps
// everything raft acknowledged, from amnesia, which does not.
func (s *Store) Incarnation() string { return s.incarnation }

// Rejoining reports the flag SetRejoining stored; false when it was never set.
func (s *Store) Rejoining() (bool, error) {
	var on bool
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketNode).Get(keyRejoining)
		on = len(v) == 1 && v[0] == 1
		return nil
	})
	return on, err
}

// SetRejoining stores, durably, whether the node's raft state is new and not yet confirmed
// caught up by a leader, so that a restart in between keeps refusing votes.
func (s *Store) SetRejoining(on bool) error {
	v := byte(0)
	if on {
		v = 1
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketNode).Put(keyRejoining, []byte{v})
	})
}
