package storage

import (
	"path/filepath"
	"testing"
)

// The commit index raft stages is stored with the next append, survives a reopen, never goes
// back, and a staged index alone (no append) is not durable.
func TestCommitIndexStoredWithTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), RaftDBName)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetCommitIndex(); got != 0 {
		t.Fatalf("a new store's commit index is %d, want 0", got)
	}
	watch := s.CommitWatch()
	if err := s.StageCommitIndex(3); err != nil {
		t.Fatal(err)
	}
	if s.CommitIndex() != 0 {
		t.Fatal("a staged commit index counted before any append stored it")
	}
	if err := s.StoreLogs(mkLogs(1, 5)); err != nil {
		t.Fatal(err)
	}
	if s.CommitIndex() != 3 {
		t.Fatalf("commit index %d after the append, want 3", s.CommitIndex())
	}
	select {
	case <-watch:
	default:
		t.Fatal("CommitWatch was not signalled when the commit index grew")
	}
	if err := s.StageCommitIndex(2); err != nil { // raft never does; the store must not go back
		t.Fatal(err)
	}
	if err := s.StoreLogs(mkLogs(6, 6)); err != nil {
		t.Fatal(err)
	}
	if err := s.StageCommitIndex(9); err != nil { // staged, never stored: lost by the close
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, _ := s.GetCommitIndex(); got != 3 {
		t.Fatalf("commit index %d after a reopen, want 3", got)
	}
}
