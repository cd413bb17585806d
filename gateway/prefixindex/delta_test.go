package prefixindex

import (
	"bytes"
	"cmp"
	"errors"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
)

func sortUses(us []BlockUse) {
	slices.SortFunc(us, func(a, b BlockUse) int {
		if c := cmp.Compare(a.Last, b.Last); c != 0 {
			return c
		}
		return cmp.Compare(a.Hash, b.Hash)
	})
}

// TestSnapshotApply moves a worker's entry to another index, as a new owner would take it, and
// checks the other index then routes the same.
func TestSnapshotApply(t *testing.T) {
	src := New(Config{}).Model([]byte("m"))
	a, b := text(1, 700), text(2, 300)
	src.Insert(wk("w1"), blocksOf(a), t0)
	src.Insert(wk("w1"), blocksOf(b), t0.Add(time.Second))
	src.Insert(wk("w2"), blocksOf(b), t0.Add(2*time.Second))

	dst := New(Config{}).Model([]byte("m"))
	for _, w := range []string{"w1", "w2"} {
		d := src.Snapshot(wk(w))
		enc, _ := d.AppendBinary(nil)
		var got Delta
		if err := got.UnmarshalBinary(enc); err != nil {
			t.Fatal(err)
		}
		dst.Apply(wk(w), got)
		dst.Apply(wk(w), got) // twice: no change
	}
	for _, s := range []string{a, b, a[:200], b + "more"} {
		want, got := lookup(src, s, "w1", "w2"), lookup(dst, s, "w1", "w2")
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Errorf("lookup %.10q… after the move (-source +copy):\n%s", s, diff)
		}
	}
	if src.Size() != dst.Size() {
		t.Errorf("size %d, copy %d", src.Size(), dst.Size())
	}
}

func TestApplyMergesLatestAndEvictions(t *testing.T) {
	m := New(Config{}).Model(nil)
	blk := blocksOf(text(3, 2*BlockSize))
	h0, h1 := blk.Hashes[0], blk.Hashes[1]
	tests := []struct {
		name  string
		delta Delta
		want  []BlockUse
	}{
		{"used blocks are added", Delta{Used: []BlockUse{{h0, 10}, {h1, 9}}}, []BlockUse{{h1, 9}, {h0, 10}}},
		{"an older use changes nothing", Delta{Used: []BlockUse{{h0, 5}}}, []BlockUse{{h1, 9}, {h0, 10}}},
		{"a later use moves the time", Delta{Used: []BlockUse{{h1, 20}}}, []BlockUse{{h0, 10}, {h1, 20}}},
		{"an eviction older than the last use is ignored", Delta{Evicted: []BlockUse{{h1, 19}}}, []BlockUse{{h0, 10}, {h1, 20}}},
		{"an eviction at or after the last use removes", Delta{Evicted: []BlockUse{{h1, 20}, {h0, 11}}}, nil},
		{"eviction of what the entry lacks", Delta{Evicted: []BlockUse{{h0, 99}}}, nil},
	}
	for _, tt := range tests {
		m.Apply(wk("w"), tt.delta)
		if diff := gocmp.Diff(tt.want, m.Snapshot(wk("w")).Used); diff != "" {
			t.Fatalf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	if m.Size() != 0 || m.Held(wk("w")) != 0 {
		t.Errorf("size %d held %d after every block went", m.Size(), m.Held(wk("w")))
	}
}

func TestDeltaEncoding(t *testing.T) {
	b := blocksOf(text(4, 128*BlockSize))
	d := Delta{Used: b.Uses(t0, nil), Evicted: []BlockUse{{Hash: 1, Last: -5}, {Hash: 1 << 63, Last: 1 << 62}}}
	enc, err := d.AppendBinary([]byte("prefix"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(enc, []byte("prefix")) {
		t.Fatal("AppendBinary dropped what b held")
	}
	enc = enc[len("prefix"):]
	// One insert's blocks: 8 bytes of hash and 1 of time each, beyond the first's time.
	used, _ := Delta{Used: d.Used}.AppendBinary(nil)
	if per := float64(len(used)) / float64(len(d.Used)); per > 9.2 {
		t.Errorf("%.2f bytes per block of an insert, want about 9", per)
	}
	var got Delta
	if err := got.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(d, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range [][]byte{nil, {2}, {1}, {1, 5, 0}, append(append([]byte{}, enc...), 0)} {
		var d Delta
		err := d.UnmarshalBinary(bad)
		if !errors.Is(err, ErrDeltaCorrupt) && !errors.Is(err, ErrDeltaVersion) {
			t.Errorf("UnmarshalBinary(%x) = %v, want an error", bad, err)
		}
	}
}

func FuzzDeltaUnmarshal(f *testing.F) {
	enc, _ := Delta{Used: blocksOf(text(5, 300)).Uses(t0, nil), Evicted: []BlockUse{{7, 8}}}.AppendBinary(nil)
	f.Add(enc)
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Delta
		if d.UnmarshalBinary(b) != nil {
			return
		}
		again, _ := d.AppendBinary(nil)
		var d2 Delta
		if err := d2.UnmarshalBinary(again); err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		if !gocmp.Equal(d, d2) {
			t.Fatalf("decode → encode → decode changed the delta")
		}
		m := New(Config{}).Model(nil)
		m.Apply(wk("w"), d) // no panic, and the counts stay consistent
		var size int64
		for _, u := range m.Snapshot(wk("w")).Used {
			size += int64(BlockLen(u.Hash))
		}
		if size != m.Size() {
			t.Fatalf("size %d, blocks hold %d", m.Size(), size)
		}
	})
}
