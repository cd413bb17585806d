package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrKeyNotFound is what Get and GetUint64 return for a key that was never set. Its text is
// exactly "not found" because raft compares err.Error() with that string (in NewRaft,
// HasExistingState and vote handling) to tell "never written" from a real failure; it is
// returned unwrapped for the same reason.
var ErrKeyNotFound = errors.New("not found")

// ErrLocked is wrapped by Open when another process (or another Store in this process) holds
// the database file.
var ErrLocked = errors.New("held by another meshgw")

// DefaultLockTimeout is how long Open waits for the database file lock.
const DefaultLockTimeout = time.Second

const fileMode = 0o600

var (
	bucketLogs   = []byte("logs")
	bucketStable = []byte("stable")
)

// Compile-time checks of the raft interfaces the Store implements.
var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// Options tunes Open. The zero value is the production setting.
type Options struct {
	// LockTimeout bounds the wait for the file lock that keeps two processes off one database.
	// Zero means DefaultLockTimeout.
	LockTimeout time.Duration
}

// Store is raft's log store and stable store in one bbolt file. It is safe for concurrent use:
// bbolt runs one writer at a time and readers beside it.
type Store struct {
	db   *bolt.DB
	path string
	// incarnation is read, or made, by Open (Incarnation).
	incarnation string

	// staged is the commit index raft staged for the next StoreLogs; commit is the one stored,
	// and commitSig is closed and replaced when it grows (commitindex.go).
	staged    atomic.Uint64
	commit    atomic.Uint64
	commitSig atomic.Pointer[chan struct{}]
	// commitMu is held by each transaction that may store a commit index (StoreLogs,
	// SaveCommit) until it published it, so that none writes an index below one already
	// stored but not yet published.
	commitMu sync.Mutex
}

// Open opens or creates the bbolt database at path (mode 0600) and its buckets. If another
// process holds the file, Open fails after opts.LockTimeout with an error wrapping ErrLocked
// that names the state directory, instead of waiting forever.
func Open(path string, opts Options) (*Store, error) {
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	db, err := bolt.Open(path, fileMode, &bolt.Options{
		Timeout: timeout,
		// The freelist is rebuilt by a scan at open instead of being written by every commit:
		// cheaper commits, and no persisted freelist that a crash could leave inconsistent.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("state dir %s is %w: lock on %s not acquired within %s",
			filepath.Dir(path), ErrLocked, filepath.Base(path), timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("open raft store %s: %w", path, err)
	}
	s := &Store{db: db, path: path}
	if err := s.init(created); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// init creates the buckets and, for a new file, makes its directory entry durable.
func (s *Store) init(created bool) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketLogs, bucketStable} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if err := s.initNode(tx); err != nil {
			return err
		}
		return s.loadCommit(tx)
	})
	if err != nil {
		return fmt.Errorf("init raft store %s: %w", s.path, err)
	}
	if created {
		if err := syncDir(filepath.Dir(s.path)); err != nil {
			return fmt.Errorf("init raft store %s: %w", s.path, err)
		}
	}
	return nil
}

// Close releases the file and its lock.
func (s *Store) Close() error { return s.db.Close() }

// Path is the database file.
func (s *Store) Path() string { return s.path }

// FirstIndex returns the lowest stored log index, or 0 when there are none.
func (s *Store) FirstIndex() (uint64, error) {
	return s.edgeIndex((*bolt.Cursor).First)
}

// LastIndex returns the highest stored log index, or 0 when there are none.
func (s *Store) LastIndex() (uint64, error) {
	return s.edgeIndex((*bolt.Cursor).Last)
}

func (s *Store) edgeIndex(move func(*bolt.Cursor) ([]byte, []byte)) (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		k, _ := move(tx.Bucket(bucketLogs).Cursor())
		if k == nil {
			return nil
		}
		var err error
		idx, err = keyIndex(k)
		return err
	})
	return idx, err
}

// GetLog reads the entry at index into l, or returns raft.ErrLogNotFound.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	return s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLogs).Get(indexKey(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		return decodeLog(index, v, l)
	})
}

// StoreLog stores one entry.
func (s *Store) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs stores a batch in one transaction: after a crash either all of it is there or none.
// An entry at an existing index replaces it. The commit index raft staged, if it grew, is stored
// in the same transaction.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	var commit uint64
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		if commit, err = s.putStagedCommit(tx); err != nil {
			return err
		}
		b := tx.Bucket(bucketLogs)
		size := 0
		for _, l := range logs {
			size += len(l.Data) + len(l.Extensions) + maxOverhead
		}
		buf := make([]byte, 0, size)
		for _, l := range logs {
			// bbolt keeps the value slice until commit, so each entry needs its own buffer;
			// one growing buffer would be overwritten by the next entry.
			buf = appendLog(buf[len(buf):], l)
			if err := b.Put(indexKey(l.Index), buf); err != nil {
				return fmt.Errorf("store log %d: %w", l.Index, err)
			}
		}
		return nil
	})
	if err == nil {
		s.committed(commit)
	}
	return err
}

// DeleteRange deletes the entries from lo to hi, both included, in one transaction. It reads
// the keys first and then deletes each by its key. (Seeking to lo again after each delete, as
// it once did, is quadratic: bbolt merges the pages a transaction emptied only at commit, so
// each seek walked every emptied page again; raft's compaction after a snapshot deletes about
// 8,000 entries at once, and that walk took a quarter of a fill's CPU.)
func (s *Store) DeleteRange(lo, hi uint64) error {
	if lo > hi {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		var found []uint64
		c := b.Cursor()
		for k, _ := c.Seek(indexKey(lo)); k != nil; k, _ = c.Next() {
			idx, err := keyIndex(k)
			if err != nil {
				return err
			}
			if idx > hi {
				break
			}
			found = append(found, idx)
		}
		key := make([]byte, 8) // bbolt's Delete keeps no reference to the key
		for _, idx := range found {
			binary.BigEndian.PutUint64(key, idx)
			if err := b.Delete(key); err != nil {
				return fmt.Errorf("delete log %d: %w", idx, err)
			}
		}
		return nil
	})
}

// Set stores a stable value.
func (s *Store) Set(key, val []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketStable).Put(key, val)
	})
}

// Get returns a copy of a stable value, or ErrKeyNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	var val []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketStable).Get(key)
		if v == nil {
			return ErrKeyNotFound
		}
		val = bytes.Clone(v)
		return nil
	})
	return val, err
}

// SetUint64 stores a stable value as 8 big-endian bytes.
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns a value stored by SetUint64, or 0 and ErrKeyNotFound.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("stable key %q holds %d bytes, not a uint64", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func indexKey(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

func keyIndex(k []byte) (uint64, error) {
	if len(k) != 8 {
		return 0, fmt.Errorf("%w: log key of %d bytes", errCorrupt, len(k))
	}
	return binary.BigEndian.Uint64(k), nil
}

// syncDir makes the entries of a directory (a newly created file in it) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
