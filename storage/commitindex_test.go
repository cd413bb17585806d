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

// SaveCommit stores a commit index only for an entry the log holds with the term given (the
// entry the caller knows committed), never below the stored one, durably, and wakes
// CommitWatch; an append with a lower staged index does not take it back.
func TestSaveCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), RaftDBName)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(mkLogs(1, 4)); err != nil { // term 1
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		index, term uint64
	}{
		{"an entry of another term", 3, 2},
		{"an entry the log lacks", 7, 1},
	} {
		if saved, err := s.SaveCommit(tc.index, tc.term); err != nil || saved {
			t.Errorf("%s: saved %v, err %v; want neither", tc.name, saved, err)
		}
	}
	if s.CommitIndex() != 0 {
		t.Fatalf("commit index %d after refused saves", s.CommitIndex())
	}
	watch := s.CommitWatch()
	if saved, err := s.SaveCommit(3, 1); err != nil || !saved {
		t.Fatalf("saving entry 3: saved %v, err %v", saved, err)
	}
	select {
	case <-watch:
	default:
		t.Fatal("CommitWatch did not wake")
	}
	if saved, _ := s.SaveCommit(2, 1); saved || s.CommitIndex() != 3 {
		t.Fatalf("a lower index: saved %v, commit index %d; want 3 kept", saved, s.CommitIndex())
	}
	if err := s.StageCommitIndex(2); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(mkLogs(5, 5)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.CommitIndex(); got != 3 {
		t.Fatalf("commit index %d after a reopen, want 3", got)
	}
}
