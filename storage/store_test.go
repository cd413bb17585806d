package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

func openTemp(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), RaftDBName), Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mkLogs(lo, hi uint64) []*raft.Log {
	var logs []*raft.Log
	for i := lo; i <= hi; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Data: fmt.Appendf(nil, "log-%d", i)})
	}
	return logs
}

func indexes(t *testing.T, s *Store) (first, last uint64) {
	t.Helper()
	first, err := s.FirstIndex()
	if err != nil {
		t.Fatalf("FirstIndex: %v", err)
	}
	last, err = s.LastIndex()
	if err != nil {
		t.Fatalf("LastIndex: %v", err)
	}
	return first, last
}

// logCmp compares logs as raft sees them: nil and empty byte slices alike, times by Equal.
var logCmp = cmpopts.EquateEmpty()

func TestOpenCreatesFile0600(t *testing.T) {
	s := openTemp(t)
	info, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != 0o600 {
		t.Errorf("raft.db mode = %#o, want 0600", got)
	}
}

func TestEmptyStore(t *testing.T) {
	s := openTemp(t)
	if first, last := indexes(t, s); first != 0 || last != 0 {
		t.Errorf("first, last = %d, %d; want 0, 0", first, last)
	}
	if err := s.GetLog(1, new(raft.Log)); !errors.Is(err, raft.ErrLogNotFound) {
		t.Errorf("GetLog(1) = %v, want ErrLogNotFound", err)
	}
	// raft compares the text, not the value: see api.go and raft.go in hashicorp/raft.
	if _, err := s.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Errorf("Get(missing) error = %v, want text \"not found\"", err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); v != 0 || err == nil || err.Error() != "not found" {
		t.Errorf("GetUint64(missing) = %d, %v; want 0, \"not found\"", v, err)
	}
	has, err := raft.HasExistingState(s, s, raft.NewInmemSnapshotStore())
	if err != nil || has {
		t.Errorf("HasExistingState(empty) = %v, %v; want false, nil", has, err)
	}
}

func TestLogRoundTrip(t *testing.T) {
	when := time.Date(2026, 3, 4, 5, 6, 7, 891011121, time.UTC)
	tests := []struct {
		name string
		log  raft.Log
	}{
		{"every field", raft.Log{Index: 7, Term: 3, Type: raft.LogCommand, Data: []byte("cmd"),
			Extensions: []byte{0, 1, 2}, AppendedAt: when}},
		{"zero time and nil slices", raft.Log{Index: 1, Term: 1, Type: raft.LogNoop}},
		{"empty slices", raft.Log{Index: 2, Term: 1, Data: []byte{}, Extensions: []byte{}}},
		{"configuration", raft.Log{Index: 3, Term: 9, Type: raft.LogConfiguration, Data: []byte{0x80}}},
		{"barrier", raft.Log{Index: 4, Term: 2, Type: raft.LogBarrier}},
		{"large data", raft.Log{Index: 5, Term: 2, Data: bytes.Repeat([]byte("x"), 64<<10)}},
		{"max values", raft.Log{Index: ^uint64(0), Term: ^uint64(0), Type: raft.LogType(255),
			AppendedAt: time.Unix(-1<<40, 999999999)}},
		{"time with monotonic reading", raft.Log{Index: 6, Term: 1, AppendedAt: time.Now()}},
	}
	s := openTemp(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.StoreLog(&tt.log); err != nil {
				t.Fatalf("StoreLog: %v", err)
			}
			var got raft.Log
			if err := s.GetLog(tt.log.Index, &got); err != nil {
				t.Fatalf("GetLog: %v", err)
			}
			if diff := cmp.Diff(tt.log, got, logCmp); diff != "" {
				t.Errorf("round trip (-stored +read):\n%s", diff)
			}
		})
	}
}

func TestDecodedSlicesAreIndependent(t *testing.T) {
	s := openTemp(t)
	if err := s.StoreLog(&raft.Log{Index: 1, Data: []byte("ab"), Extensions: []byte("cd")}); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(1, &l); err != nil {
		t.Fatal(err)
	}
	l.Data = append(l.Data, 'X') // must not overwrite Extensions
	if string(l.Extensions) != "cd" {
		t.Errorf("appending to Data changed Extensions to %q", l.Extensions)
	}
}

func TestStoreLogsBatch(t *testing.T) {
	s := openTemp(t)
	logs := mkLogs(1, 300)
	if err := s.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs: %v", err)
	}
	if first, last := indexes(t, s); first != 1 || last != 300 {
		t.Errorf("first, last = %d, %d; want 1, 300", first, last)
	}
	for _, want := range logs {
		var got raft.Log
		if err := s.GetLog(want.Index, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", want.Index, err)
		}
		if diff := cmp.Diff(*want, got, logCmp); diff != "" {
			t.Fatalf("GetLog(%d) (-want +got):\n%s", want.Index, diff)
		}
	}
	if err := s.StoreLogs(nil); err != nil {
		t.Errorf("StoreLogs(nil) = %v", err)
	}
}

func TestStoreLogsOverwrites(t *testing.T) {
	s := openTemp(t)
	if err := s.StoreLogs(mkLogs(1, 5)); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLog(&raft.Log{Index: 3, Term: 2, Data: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	var got raft.Log
	if err := s.GetLog(3, &got); err != nil || got.Term != 2 || string(got.Data) != "new" {
		t.Errorf("GetLog(3) = %+v, %v; want term 2 data new", got, err)
	}
}

func TestDeleteRange(t *testing.T) {
	tests := []struct {
		name        string
		lo, hi      uint64
		first, last uint64
		missing     []uint64
		present     []uint64
	}{
		{"prefix compaction moves first", 1, 40, 41, 100, []uint64{1, 20, 40}, []uint64{41, 100}},
		{"suffix truncation moves last", 61, 100, 1, 60, []uint64{61, 100}, []uint64{1, 60}},
		{"middle leaves a gap", 10, 20, 1, 100, []uint64{10, 15, 20}, []uint64{9, 21}},
		{"everything", 1, 100, 0, 0, []uint64{1, 50, 100}, nil},
		{"beyond both ends", 0, 1000, 0, 0, []uint64{1, 100}, nil},
		{"past the end", 200, 300, 1, 100, nil, []uint64{1, 100}},
		{"single entry", 50, 50, 1, 100, []uint64{50}, []uint64{49, 51}},
		{"inverted range is a no-op", 20, 10, 1, 100, nil, []uint64{10, 15, 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTemp(t)
			if err := s.StoreLogs(mkLogs(1, 100)); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteRange(tt.lo, tt.hi); err != nil {
				t.Fatalf("DeleteRange: %v", err)
			}
			if first, last := indexes(t, s); first != tt.first || last != tt.last {
				t.Errorf("first, last = %d, %d; want %d, %d", first, last, tt.first, tt.last)
			}
			for _, i := range tt.missing {
				if err := s.GetLog(i, new(raft.Log)); !errors.Is(err, raft.ErrLogNotFound) {
					t.Errorf("GetLog(%d) = %v, want ErrLogNotFound", i, err)
				}
			}
			for _, i := range tt.present {
				if err := s.GetLog(i, new(raft.Log)); err != nil {
					t.Errorf("GetLog(%d) = %v, want present", i, err)
				}
			}
		})
	}
}

// TestDeleteRangeCountsExactly deletes across many bbolt pages (entries big enough to fill
// several pages each range) and checks the exact survivors, which would catch a cursor that
// skips keys after a delete.
func TestDeleteRangeCountsExactly(t *testing.T) {
	s := openTemp(t)
	var logs []*raft.Log
	for i := uint64(1); i <= 2000; i++ {
		logs = append(logs, &raft.Log{Index: i, Data: bytes.Repeat([]byte{byte(i)}, int(i%300))})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(101, 1900); err != nil {
		t.Fatal(err)
	}
	var survivors int
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLogs).ForEach(func(k, _ []byte) error {
			survivors++
			return nil
		})
	})
	if err != nil || survivors != 200 {
		t.Errorf("survivors = %d (%v), want 200", survivors, err)
	}
}

func TestStableStore(t *testing.T) {
	s := openTemp(t)
	if err := s.Set([]byte("LastVoteCand"), []byte("node-a")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-b")); err != nil {
		t.Fatal(err)
	}
	v, err := s.Get([]byte("LastVoteCand"))
	if err != nil || string(v) != "node-b" {
		t.Fatalf("Get = %q, %v; want node-b", v, err)
	}
	v[0] = 'X' // the caller owns the returned slice
	if v2, _ := s.Get([]byte("LastVoteCand")); string(v2) != "node-b" {
		t.Errorf("mutating a Get result changed the store: %q", v2)
	}
	for _, want := range []uint64{0, 1, 1 << 40, ^uint64(0)} {
		if err := s.SetUint64([]byte("CurrentTerm"), want); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetUint64([]byte("CurrentTerm")); err != nil || got != want {
			t.Errorf("GetUint64 = %d, %v; want %d", got, err, want)
		}
	}
	if _, err := s.GetUint64([]byte("LastVoteCand")); err == nil {
		t.Error("GetUint64 of a 6-byte value succeeded, want an error")
	}
	has, err := raft.HasExistingState(s, s, raft.NewInmemSnapshotStore())
	if err != nil || !has {
		t.Errorf("HasExistingState(term set) = %v, %v; want true, nil", has, err)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), RaftDBName)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := mkLogs(1, 50)
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if first, last := indexes(t, s); first != 11 || last != 50 {
		t.Errorf("after reopen first, last = %d, %d; want 11, 50", first, last)
	}
	var got raft.Log
	if err := s.GetLog(30, &got); err != nil || !cmp.Equal(*logs[29], got, logCmp) {
		t.Errorf("GetLog(30) after reopen = %+v, %v", got, err)
	}
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
		t.Errorf("CurrentTerm after reopen = %d, %v; want 7", term, err)
	}
}

func TestOpenLockedBySecondOpener(t *testing.T) {
	s := openTemp(t)
	start := time.Now()
	_, err := Open(s.Path(), Options{LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	want := "state dir " + filepath.Dir(s.Path()) + " is held by another meshgw"
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %q, want prefix %q", err, want)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("second Open waited %v, want about the 100ms lock timeout", waited)
	}
}

func TestGetLogRejectsCorruptEntries(t *testing.T) {
	good := appendLog(nil, &raft.Log{Term: 4, Data: []byte("payload"), AppendedAt: time.Now()})
	flipped := bytes.Clone(good)
	flipped[len(flipped)-3] ^= 0x40
	badVersion := bytes.Clone(good)
	badVersion[0] = 9
	tests := []struct {
		name string
		val  []byte
	}{
		{"empty", []byte{}},
		{"short header", good[:3]},
		{"unknown version", badVersion},
		{"flipped bit", flipped},
		{"truncated body", good[:len(good)-4]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTemp(t)
			err := s.db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketLogs).Put(indexKey(1), tt.val)
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.GetLog(1, new(raft.Log)); !errors.Is(err, errCorrupt) {
				t.Errorf("GetLog = %v, want a corrupt-entry error", err)
			}
		})
	}
}

// TestConcurrentReadersSeeWholeBatches appends batches while readers check that every index up
// to LastIndex is readable: a reader never sees half of a batch.
func TestConcurrentReadersSeeWholeBatches(t *testing.T) {
	s := openTemp(t)
	const batches, size = 40, 16
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 3 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				last, err := s.LastIndex()
				if err == nil && last%size != 0 {
					err = fmt.Errorf("LastIndex %d is inside a batch", last)
				}
				for i := uint64(1); err == nil && i <= last; i += 7 {
					err = s.GetLog(i, new(raft.Log))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for b := range uint64(batches) {
		if err := s.StoreLogs(mkLogs(b*size+1, (b+1)*size)); err != nil {
			t.Error(err)
			break
		}
	}
	close(done)
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
