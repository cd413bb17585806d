package prefixindex

import (
	"cmp"
	"encoding/binary"
	"errors"
	"slices"
	"time"
)

// BlockUse is one block of a worker's entry: its chained hash, and its last use in unix
// nanoseconds (less the block's position in the text that used it; see Uses).
type BlockUse struct {
	Hash uint64
	Last int64
}

// Delta is a part of one worker's entry, as an index gives it to another: blocks used, which
// merge by keeping the latest use of each, and blocks its writer evicted, which go unless they
// were used later than their eviction says. Used blocks merge in any order and any number of
// times to the same entry; an eviction applies to the uses made before it, so a writer's
// deltas are applied in the order it made them.
type Delta struct {
	Used    []BlockUse
	Evicted []BlockUse
}

// Uses appends to dst the uses that Insert(worker, b, now) records: the delta that tells
// another index of that insert.
func (b *Blocks) Uses(now time.Time, dst []BlockUse) []BlockUse {
	t := now.UnixNano()
	for i, h := range b.Hashes {
		dst = append(dst, BlockUse{Hash: h, Last: t - int64(i)})
	}
	return dst
}

// Snapshot returns worker's whole entry as a delta, least recently used first: what a new
// holder of the entry applies to know what this index knows.
func (m *Model) Snapshot(worker Worker) Delta {
	m.mu.RLock()
	var used []BlockUse
	if e := m.workers[worker]; e != nil {
		used = make([]BlockUse, 0, len(e.blocks))
		for h, last := range e.blocks {
			used = append(used, BlockUse{Hash: h, Last: last})
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(used, func(a, b BlockUse) int {
		if c := cmp.Compare(a.Last, b.Last); c != 0 {
			return c
		}
		return cmp.Compare(a.Hash, b.Hash)
	})
	return Delta{Used: used}
}

// Apply merges d into worker's entry: its used blocks keep their latest use, and its evicted
// blocks go when their last use here is not later than the eviction's.
func (m *Model) Apply(worker Worker, d Delta) {
	m.mu.Lock()
	if len(d.Used) > 0 {
		e := m.entryLocked(worker, len(d.Used))
		for _, u := range d.Used {
			m.useLocked(e, u.Hash, u.Last)
		}
	}
	if e := m.workers[worker]; e != nil && len(d.Evicted) > 0 {
		for _, u := range d.Evicted {
			if last, ok := e.blocks[u.Hash]; ok && last <= u.Last {
				m.dropLocked(e, u.Hash)
			}
		}
		if len(e.blocks) == 0 {
			delete(m.workers, worker)
		}
	}
	over := m.size > 2*m.x.cfg.MaxChars
	m.mu.Unlock()
	if over {
		m.x.overCap.Store(true)
	}
}

// deltaVersion is the first byte of an encoded Delta.
const deltaVersion = 1

// minUseBytes is the least an encoded BlockUse takes: its 8-byte hash and a 1-byte time.
const minUseBytes = 9

// AppendBinary appends d's encoding to b: a version byte, then Used and Evicted, each as a
// count followed by every block's 8-byte hash and its last use as a signed varint difference
// from the previous block's (from 0 for the first). The blocks of one insert, or of a
// snapshot, take about 9 bytes each.
func (d Delta) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, deltaVersion)
	b = appendUses(b, d.Used)
	return appendUses(b, d.Evicted), nil
}

func appendUses(b []byte, us []BlockUse) []byte {
	b = binary.AppendUvarint(b, uint64(len(us)))
	var prev int64
	for _, u := range us {
		b = binary.LittleEndian.AppendUint64(b, u.Hash)
		b = binary.AppendVarint(b, u.Last-prev)
		prev = u.Last
	}
	return b
}

// Errors of UnmarshalBinary.
var (
	ErrDeltaVersion = errors.New("prefixindex: delta of an unknown version")
	ErrDeltaCorrupt = errors.New("prefixindex: delta is malformed")
)

// UnmarshalBinary decodes what AppendBinary encoded into d. It never allocates more than the
// input can hold.
func (d *Delta) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != deltaVersion {
		return ErrDeltaVersion
	}
	b = b[1:]
	var err error
	if d.Used, b, err = readUses(b); err != nil {
		return err
	}
	if d.Evicted, b, err = readUses(b); err != nil {
		return err
	}
	if len(b) != 0 {
		return ErrDeltaCorrupt
	}
	return nil
}

func readUses(b []byte) ([]BlockUse, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k)/minUseBytes {
		return nil, nil, ErrDeltaCorrupt
	}
	b = b[k:]
	var us []BlockUse
	if n > 0 {
		us = make([]BlockUse, 0, n)
	}
	var prev int64
	for range n {
		if len(b) < minUseBytes {
			return nil, nil, ErrDeltaCorrupt
		}
		h := binary.LittleEndian.Uint64(b)
		dt, k := binary.Varint(b[8:])
		if k <= 0 {
			return nil, nil, ErrDeltaCorrupt
		}
		prev += dt
		us = append(us, BlockUse{Hash: h, Last: prev})
		b = b[8+k:]
	}
	return us, b, nil
}
