package storage

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// load returns what LoadFSM reads, records as a map.
func load(t *testing.T, s *Store) (string, map[string]string) {
	t.Helper()
	recs := map[string]string{}
	meta, err := s.LoadFSM(func(k, v []byte) error {
		recs[string(k)] = string(v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(meta), recs
}

func kv(k, v string) KV { return KV{Key: []byte(k), Value: []byte(v)} }

func TestFSMStateSavesAndSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/raft.db"
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if meta, recs := load(t, s); meta != "" || len(recs) != 0 {
		t.Fatalf("a new store holds state: %q %v", meta, recs)
	}
	steps := []struct {
		name     string
		d        FSMDelta
		wantMeta string
		want     map[string]string
	}{
		{"full", FSMDelta{Meta: []byte("m1"), Full: true, Puts: []KV{kv("a", "1"), kv("b", "2")}},
			"m1", map[string]string{"a": "1", "b": "2"}},
		{"delta", FSMDelta{Meta: []byte("m2"), Puts: []KV{kv("b", "3"), kv("c", "4")}, Dels: [][]byte{[]byte("a")}},
			"m2", map[string]string{"b": "3", "c": "4"}},
		{"full again drops what it does not list", FSMDelta{Meta: []byte("m3"), Full: true, Puts: []KV{kv("d", "5")}},
			"m3", map[string]string{"d": "5"}},
	}
	for _, st := range steps {
		if err := s.SaveFSM(st.d); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		meta, recs := load(t, s)
		if meta != st.wantMeta {
			t.Errorf("%s: meta %q, want %q", st.name, meta, st.wantMeta)
		}
		if diff := cmp.Diff(st.want, recs); diff != "" {
			t.Errorf("%s: records (-want +got):\n%s", st.name, diff)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if meta, recs := load(t, s); meta != "m3" || !cmp.Equal(recs, map[string]string{"d": "5"}) {
		t.Fatalf("after a reopen: %q %v", meta, recs)
	}
}
