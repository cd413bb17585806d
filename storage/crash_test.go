package storage

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// crashHelperEnv, when set to a database path, turns the test binary into the writer that
// TestKilledMidBatch kills.
const crashHelperEnv = "MESHGW_STORAGE_CRASH_WRITER"

var keyCurrentTerm = []byte("CurrentTerm")

// batchSize is the size of the batch that starts at index start. It depends only on start, so
// the parent can recompute every batch boundary from index 1.
func batchSize(start uint64) uint64 { return 1 + (start*7)%23 }

// payload is the data of entry i: its length and bytes both depend on i, so a torn or misplaced
// entry cannot pass for a good one.
func payload(i uint64) []byte {
	b := binary.BigEndian.AppendUint64(nil, i)
	return append(b, bytes.Repeat([]byte{byte(i), byte(i >> 8)}, int(i*7919%1500))...)
}

// crashWriter appends batches, compacts now and then, records the last index as the stable
// CurrentTerm, and prints each committed last index, until it is killed. It stops by itself
// after a bound, so a parent that failed to kill it does not leave it running for long.
func crashWriter(path string) error {
	s, err := Open(path, Options{LockTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	next, err := s.LastIndex()
	if err != nil {
		return err
	}
	next++
	deadline := time.Now().Add(30 * time.Second)
	for batch := 0; time.Now().Before(deadline); batch++ {
		n := batchSize(next)
		logs := make([]*raft.Log, 0, n)
		for i := next; i < next+n; i++ {
			logs = append(logs, &raft.Log{Index: i, Term: i, Data: payload(i), AppendedAt: time.Now()})
		}
		if err := s.StoreLogs(logs); err != nil {
			return err
		}
		last := next + n - 1
		if batch%5 == 4 && last > 200 {
			if err := s.DeleteRange(0, last-200); err != nil {
				return err
			}
		}
		if err := s.SetUint64(keyCurrentTerm, last); err != nil {
			return err
		}
		if _, err := fmt.Fprintln(os.Stdout, last); err != nil {
			return err
		}
		next = last + 1
	}
	return s.Close()
}

// TestKilledMidBatch kills a writer process with SIGKILL at a random point, several times over
// the same file, and checks after each kill that the store opens, passes bbolt's consistency
// check, holds a contiguous run of intact entries ending on a batch boundary, and has lost
// nothing the writer reported as committed.
func TestKilledMidBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns writer processes")
	}
	path := filepath.Join(t.TempDir(), RaftDBName)
	start := time.Now()
	var reported uint64
	rounds := 0
	for ; rounds < 12 && time.Since(start) < 20*time.Second; rounds++ {
		killAfter := 1 + rand.IntN(25)
		got := runAndKill(t, path, killAfter)
		if got < reported {
			t.Fatalf("round %d: writer reported %d, below %d from an earlier round", rounds, got, reported)
		}
		reported = got
		verifyAfterCrash(t, path, reported)
	}
	if rounds < 2 {
		t.Errorf("only %d kill rounds ran in the time bound", rounds)
	}
}

// runAndKill starts the writer and, once it has reported killAfter commits, kills it after a
// random delay of up to 4ms (a timer, so the kill lands anywhere in a write, not only right
// after a report). It returns the last index the writer reported before dying.
func runAndKill(t *testing.T, path string, killAfter int) uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := func() { _ = cmd.Process.Kill() } // SIGKILL: no deferred code, no Close in the writer
	bound := time.AfterFunc(15*time.Second, kill)
	defer bound.Stop()
	var last uint64
	lines := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() { // ends when the killed writer's stdout closes
		v, err := strconv.ParseUint(sc.Text(), 10, 64)
		if err != nil {
			t.Errorf("writer printed %q", sc.Text())
			kill()
			break
		}
		last = v
		if lines++; lines == killAfter {
			time.AfterFunc(rand.N(4*time.Millisecond), kill)
		}
	}
	_ = cmd.Wait()
	if lines < killAfter {
		t.Fatalf("writer stopped after %d of %d commits: %s", lines, killAfter, stderr.String())
	}
	return last
}

func verifyAfterCrash(t *testing.T, path string, reported uint64) {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	err = s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("bbolt check after kill: %v", err)
	}
	first, last := indexes(t, s)
	if last < reported {
		t.Fatalf("last index %d after kill, but %d was reported committed", last, reported)
	}
	if !isBatchEnd(last) {
		t.Fatalf("last index %d is not the end of a batch: a batch was partly stored", last)
	}
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d) in [%d, %d]: %v", i, first, last, err)
		}
		if l.Term != i || !bytes.Equal(l.Data, payload(i)) {
			t.Fatalf("entry %d is damaged: term %d, %d data bytes", i, l.Term, len(l.Data))
		}
	}
	term, err := s.GetUint64(keyCurrentTerm)
	if err != nil || term < reported || term > last || !isBatchEnd(term) {
		t.Fatalf("CurrentTerm = %d, %v; want a batch end in [%d, %d]", term, err, reported, last)
	}
}

func isBatchEnd(idx uint64) bool {
	end := uint64(0)
	for end < idx {
		end += batchSize(end + 1)
	}
	return end == idx
}
