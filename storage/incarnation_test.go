package storage

import (
	"os"
	"path/filepath"
	"testing"
)

// The incarnation is made once per database file: a reopen keeps it, a file made again (a lost
// state directory) gets another. Rejoining survives a reopen.
func TestIncarnationAndRejoining(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	first := s.Incarnation()
	if len(first) != 2*incarnationBytes {
		t.Fatalf("incarnation %q, want %d hex digits", first, 2*incarnationBytes)
	}
	if on, err := s.Rejoining(); err != nil || on {
		t.Fatalf("a new store is rejoining=%v (err %v), want false", on, err)
	}
	if err := s.SetRejoining(true); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Incarnation(); got != first {
		t.Errorf("reopened: incarnation %q, want %q", got, first)
	}
	if on, err := s.Rejoining(); err != nil || !on {
		t.Errorf("reopened: rejoining=%v (err %v), want true", on, err)
	}
	if err := s.SetRejoining(false); err != nil {
		t.Fatal(err)
	}
	if on, _ := s.Rejoining(); on {
		t.Error("rejoining still set after SetRejoining(false)")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Incarnation(); got == first || got == "" {
		t.Errorf("a database made again has incarnation %q, want a new one (the old was %q)", got, first)
	}
}
