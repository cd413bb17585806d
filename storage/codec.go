package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
)

// The value of one log entry in the logs bucket (its index is the bucket key, so it is not
// repeated here):
//
//	byte 0      format version (codecVersion)
//	bytes 1..4  CRC-32C (Castagnoli), little-endian, of every byte after it
//	uvarint     term
//	byte        type (raft.LogType)
//	byte        flags (flagAppendedAt)
//	uvarint     len(data), then data
//	uvarint     len(extensions), then extensions
//	varint      appended_at seconds since the Unix epoch  } only with flagAppendedAt
//	uvarint     appended_at nanoseconds within the second } only with flagAppendedAt
//
// bbolt commits are atomic, so a torn entry cannot appear through bbolt; the checksum is there
// for what bbolt does not check: bit rot and a file damaged by something other than bbolt.
const (
	codecVersion   = 1
	headerLen      = 1 + 4
	flagAppendedAt = 1 << 0
	// maxOverhead bounds the bytes of an encoding beyond its data and extensions.
	maxOverhead = headerLen + 4*binary.MaxVarintLen64 + 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt is wrapped by every decoding failure.
var errCorrupt = errors.New("corrupt log entry")

// appendLog appends the encoding of l to dst and returns the extended slice.
func appendLog(dst []byte, l *raft.Log) []byte {
	start := len(dst)
	dst = append(dst, codecVersion, 0, 0, 0, 0)
	dst = binary.AppendUvarint(dst, l.Term)
	var flags byte
	if !l.AppendedAt.IsZero() {
		flags |= flagAppendedAt
	}
	dst = append(dst, byte(l.Type), flags)
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	dst = append(dst, l.Extensions...)
	if flags&flagAppendedAt != 0 {
		dst = binary.AppendVarint(dst, l.AppendedAt.Unix())
		dst = binary.AppendUvarint(dst, uint64(l.AppendedAt.Nanosecond()))
	}
	sum := crc32.Checksum(dst[start+headerLen:], castagnoli)
	binary.LittleEndian.PutUint32(dst[start+1:start+headerLen], sum)
	return dst
}

// decodeLog fills l from an encoded value and the index it was stored under. The value may live
// in bbolt's memory map, so everything l keeps is copied (one allocation shared by data and
// extensions, each capped so that an append to one cannot overwrite the other). Empty data or
// extensions decode as nil. AppendedAt decodes in the local time zone, without a monotonic
// reading: equal to what was stored under time.Time.Equal.
func decodeLog(index uint64, v []byte, l *raft.Log) error {
	if len(v) < headerLen {
		return fmt.Errorf("%w at index %d: %d bytes", errCorrupt, index, len(v))
	}
	if v[0] != codecVersion {
		return fmt.Errorf("%w at index %d: unknown format version %d", errCorrupt, index, v[0])
	}
	want := binary.LittleEndian.Uint32(v[1:headerLen])
	if got := crc32.Checksum(v[headerLen:], castagnoli); got != want {
		return fmt.Errorf("%w at index %d: checksum %08x, want %08x", errCorrupt, index, got, want)
	}
	r := reader{buf: v[headerLen:]}
	term := r.uvarint()
	typ, flags := r.byte(), r.byte()
	data := r.bytes()
	ext := r.bytes()
	var appended time.Time
	if flags&flagAppendedAt != 0 {
		sec, nsec := r.varint(), r.uvarint()
		if nsec >= uint64(time.Second) {
			r.err = true
		}
		appended = time.Unix(sec, int64(nsec))
	}
	if r.err || len(r.buf) != 0 || flags&^flagAppendedAt != 0 {
		return fmt.Errorf("%w at index %d: malformed body", errCorrupt, index)
	}
	owned := make([]byte, len(data)+len(ext))
	copy(owned, data)
	copy(owned[len(data):], ext)
	*l = raft.Log{
		Index:      index,
		Term:       term,
		Type:       raft.LogType(typ),
		Data:       nilIfEmpty(owned[:len(data):len(data)]),
		Extensions: nilIfEmpty(owned[len(data):]),
		AppendedAt: appended,
	}
	return nil
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// reader consumes a byte slice and remembers whether it ever ran short, so that decodeLog checks
// once at the end instead of after every field.
type reader struct {
	buf []byte
	err bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.buf)
	if n <= 0 {
		r.err, r.buf = true, nil
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.buf)
	if n <= 0 {
		r.err, r.buf = true, nil
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

func (r *reader) byte() byte {
	if len(r.buf) == 0 {
		r.err = true
		return 0
	}
	b := r.buf[0]
	r.buf = r.buf[1:]
	return b
}

// bytes returns a length-prefixed slice aliasing the input; the caller copies it.
func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err || n > uint64(len(r.buf)) {
		r.err, r.buf = true, nil
		return nil
	}
	b := r.buf[:n]
	r.buf = r.buf[n:]
	return b
}
