package storage

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// bucketImports holds the last state this gateway imported for workers other gateways own,
// keyed by worker id: what a restart routes by until their owners are heard again.
var bucketImports = []byte("imports")

// SaveImports writes put and deletes del in one transaction.
func (s *Store) SaveImports(put map[string][]byte, del []string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketImports)
		if err != nil {
			return err
		}
		for k, v := range put {
			if err := b.Put([]byte(k), v); err != nil {
				return err
			}
		}
		for _, k := range del {
			if err := b.Delete([]byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
}

// LoadImports calls each with every saved entry; the slices are copies.
func (s *Store) LoadImports(each func(id string, v []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketImports)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error { return each(string(k), bytes.Clone(v)) })
	})
}
