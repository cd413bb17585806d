package storage

import "testing"

// TestImports: SaveImports puts and deletes in one transaction; LoadImports reads copies, and
// nothing from a store that never saved any.
func TestImports(t *testing.T) {
	s := openTemp(t)
	n := 0
	if err := s.LoadImports(func(string, []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("a new store: %d entries, %v", n, err)
	}
	if err := s.SaveImports(map[string][]byte{"w-1": []byte("a"), "w-2": []byte("b")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveImports(map[string][]byte{"w-3": []byte("c")}, []string{"w-1", "w-9"}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if err := s.LoadImports(func(id string, v []byte) error { got[id] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["w-2"] != "b" || got["w-3"] != "c" {
		t.Errorf("loaded %v, want w-2=b and w-3=c", got)
	}
}
