package storage

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
)

// sealed builds a value with a valid header and checksum around body, so that the body parser
// itself is what is tested.
func sealed(body ...byte) []byte {
	v := append([]byte{codecVersion, 0, 0, 0, 0}, body...)
	binary.LittleEndian.PutUint32(v[1:headerLen], crc32.Checksum(v[headerLen:], castagnoli))
	return v
}

func TestDecodeRejectsMalformedBodies(t *testing.T) {
	tests := []struct {
		name string
		val  []byte
	}{
		{"no body", sealed()},
		{"term only", sealed(1)},
		{"unknown flag", sealed(1, 0, 0x02, 0, 0)},
		{"data longer than value", sealed(1, 0, 0, 5, 'a')},
		{"trailing bytes", sealed(1, 0, 0, 0, 0, 0xff)},
		{"time missing", sealed(1, 0, flagAppendedAt, 0, 0)},
		{"nanoseconds out of range", sealed(1, 0, flagAppendedAt, 0, 0, 0,
			0x80, 0x94, 0xeb, 0xdc, 0x03)}, // uvarint 1e9
		{"overlong varint", sealed(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := decodeLog(1, tt.val, new(raft.Log)); !errors.Is(err, errCorrupt) {
				t.Errorf("decodeLog = %v, want a corrupt-entry error", err)
			}
		})
	}
	// The same framing around a well-formed body decodes, so the cases above fail for the
	// reason they name.
	if err := decodeLog(1, sealed(1, 0, 0, 0, 0), new(raft.Log)); err != nil {
		t.Errorf("decodeLog(minimal body) = %v", err)
	}
}

// FuzzDecodeLog checks that no input makes decodeLog panic, and that whatever it accepts
// re-encodes to the same value.
func FuzzDecodeLog(f *testing.F) {
	f.Add(appendLog(nil, &raft.Log{Term: 2, Data: []byte("x"), Extensions: []byte("y"),
		AppendedAt: time.Unix(5, 6)}))
	f.Add(sealed(1, 0, 0, 0, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		var l raft.Log
		if err := decodeLog(3, v, &l); err != nil {
			return
		}
		again := appendLog(nil, &l)
		var l2 raft.Log
		if err := decodeLog(3, again, &l2); err != nil {
			t.Fatalf("re-encoded entry does not decode: %v", err)
		}
		if diff := cmp.Diff(l, l2, logCmp); diff != "" {
			t.Fatalf("re-encoding changed the entry (-first +second):\n%s", diff)
		}
	})
}

// FuzzLogRoundTrip checks that every raft.Log survives encoding.
func FuzzLogRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint64(1), byte(0), []byte("data"), []byte(nil), int64(0), int64(0))
	f.Add(^uint64(0), uint64(0), byte(5), []byte(nil), []byte("ext"), int64(-1<<40), int64(999999999))
	f.Fuzz(func(t *testing.T, index, term uint64, typ byte, data, ext []byte, sec, nsec int64) {
		in := raft.Log{Index: index, Term: term, Type: raft.LogType(typ), Data: data, Extensions: ext}
		if sec != 0 || nsec != 0 {
			in.AppendedAt = time.Unix(sec, nsec)
		}
		var out raft.Log
		if err := decodeLog(index, appendLog(nil, &in), &out); err != nil {
			t.Fatalf("decodeLog: %v", err)
		}
		if diff := cmp.Diff(in, out, logCmp); diff != "" {
			t.Fatalf("round trip (-in +out):\n%s", diff)
		}
	})
}
