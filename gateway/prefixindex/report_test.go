package prefixindex

import (
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
)

// TestInsertReport checks what an insert tells another index: the new blocks, and the held ones
// only once their last use is older than stale; and that applying it makes the other index match
// the same.
func TestInsertReport(t *testing.T) {
	src := New(Config{}).Model([]byte("m"))
	dst := New(Config{}).Model([]byte("m"))
	sys := text(1, 10*BlockSize)
	turn1 := sys + text(2, 3*BlockSize)
	turn2 := turn1 + text(3, 2*BlockSize+5)
	const stale = time.Second

	d := src.InsertReport(wk("w"), blocksOf(turn1), t0, stale, nil)
	if len(d) != 13 {
		t.Fatalf("first insert reported %d blocks, want all 13", len(d))
	}
	dst.Apply(wk("w"), Delta{Used: d})

	d = src.InsertReport(wk("w"), blocksOf(turn2), t0.Add(stale/2), stale, nil)
	if len(d) != 3 {
		t.Fatalf("a follow-up turn within stale reported %d blocks, want its 3 new ones", len(d))
	}
	if b := blocksOf(turn2); d[0].Hash != b.Hashes[13] || d[2].Hash != b.Hashes[15] {
		t.Errorf("reported %v, want blocks 13 to 15 of the turn", d)
	}
	dst.Apply(wk("w"), Delta{Used: d})

	d = src.InsertReport(wk("w"), blocksOf(turn2), t0.Add(stale/2+time.Millisecond), stale, nil)
	if len(d) != 0 {
		t.Errorf("the same text again within stale reported %d blocks, want none", len(d))
	}
	d = src.InsertReport(wk("w"), blocksOf(sys), t0.Add(3*stale), stale, nil)
	if len(d) != 10 {
		t.Errorf("the system prompt after stale reported %d blocks, want its 10 to refresh", len(d))
	}
	dst.Apply(wk("w"), Delta{Used: d})

	for _, s := range []string{sys, turn1, turn2, turn2 + "x"} {
		if diff := gocmp.Diff(lookup(src, s, "w"), lookup(dst, s, "w")); diff != "" {
			t.Errorf("lookup %.10q… (-source +copy):\n%s", s, diff)
		}
	}
	if src.Size() != dst.Size() {
		t.Errorf("size %d, copy %d", src.Size(), dst.Size())
	}
}

// TestOnEvict checks that an eviction tells what it removed, per worker, with the cut as the
// last use, and that applying that to a copy removes the same blocks there.
func TestOnEvict(t *testing.T) {
	type ev struct {
		model string
		w     Worker
		n     int
		d     Delta
	}
	var got []ev
	x := New(Config{MaxChars: 4 * BlockSize, EvictionInterval: -1, OnEvict: func(model string, w Worker, gone []BlockUse) {
		got = append(got, ev{model, w, len(gone), Delta{Evicted: append([]BlockUse(nil), gone...)}})
	}})
	m := x.Model([]byte("m"))
	cp := New(Config{}).Model([]byte("m"))
	old, young := text(1, 4*BlockSize), text(2, 4*BlockSize)
	for i, s := range []string{old, young} {
		d := m.InsertReport(wk("w"), blocksOf(s), t0.Add(time.Duration(i)*time.Second), time.Second, nil)
		cp.Apply(wk("w"), Delta{Used: d})
	}
	x.Evict(t0.Add(2 * time.Second))
	if len(got) != 1 || got[0].model != "m" || got[0].w != wk("w") || got[0].n != 4 {
		t.Fatalf("OnEvict heard %+v, want one call for model m, worker w, 4 blocks", got)
	}
	cp.Apply(wk("w"), got[0].d)
	for _, s := range []string{old, young} {
		if diff := gocmp.Diff(lookup(m, s, "w"), lookup(cp, s, "w")); diff != "" {
			t.Errorf("lookup %.10q… after the eviction (-source +copy):\n%s", s, diff)
		}
	}
	if l := lookup(cp, young, "w")[0].Len; l != len(young) {
		t.Errorf("the copy kept %d bytes of the younger text, want all %d", l, len(young))
	}
}
