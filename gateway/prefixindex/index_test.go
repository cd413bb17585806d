package prefixindex

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func blocksOf(text string) *Blocks {
	var b Blocks
	b.SetText([]byte(text))
	return &b
}

// wk names a worker for a test.
func wk(name string) Worker { return Worker(xxhash.Sum64String(name)) }

func lookup(m *Model, text string, names ...string) []Match {
	workers := make([]Worker, len(names))
	for i, n := range names {
		workers[i] = wk(n)
	}
	out := make([]Match, len(workers))
	m.Lookup(blocksOf(text), workers, out)
	return out
}

// text returns n bytes of text that no other seed's text shares a block with.
func text(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 1))
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteByte(byte('a' + r.IntN(26)))
	}
	return sb.String()
}

func TestBlocks(t *testing.T) {
	tests := []struct {
		name     string
		len      int
		hashes   int
		lastSize int
	}{
		{"empty", 0, 0, 0},
		{"one byte", 1, 1, 1},
		{"one block", BlockSize, 1, BlockSize},
		{"block and a byte", BlockSize + 1, 2, 1},
		{"ten blocks less one byte", 10*BlockSize - 1, 10, BlockSize - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := blocksOf(text(1, tt.len))
			if b.Len != tt.len || len(b.Hashes) != tt.hashes {
				t.Fatalf("Len %d, %d hashes; want %d, %d", b.Len, len(b.Hashes), tt.len, tt.hashes)
			}
			if tt.hashes > 0 {
				if got := BlockLen(b.Hashes[tt.hashes-1]); got != tt.lastSize {
					t.Errorf("last block's length %d, want %d", got, tt.lastSize)
				}
			}
		})
	}
	// Chaining: two texts share the hashes of the blocks before their first difference, and
	// none after, even where the later blocks' bytes are equal.
	a := text(2, 5*BlockSize)
	b := a[:2*BlockSize+3] + "X" + a[2*BlockSize+4:]
	ha, hb := blocksOf(a).Hashes, blocksOf(b).Hashes
	for i := range ha {
		if same := ha[i] == hb[i]; same != (i < 2) {
			t.Errorf("block %d: shared %v, want %v", i, same, i < 2)
		}
	}
}

func TestLookupInsert(t *testing.T) {
	sys := text(3, 10*BlockSize+10) // a system prompt that ends inside a block
	turn1 := sys + " question one"
	turn2 := turn1 + " answer one question two"
	tests := []struct {
		name    string
		sent    map[string][]string // worker → texts it was sent, in order
		lookup  string
		workers []string
		want    []int // Match.Len per worker
	}{
		{"nothing sent", nil, turn1, []string{"w1", "w2"}, []int{0, 0}},
		{"same text matches whole", map[string][]string{"w1": {turn1}}, turn1, []string{"w1", "w2"}, []int{len(turn1), 0}},
		{"follow-up turn matches whole blocks of the first", map[string][]string{"w1": {turn1}}, turn2,
			[]string{"w1"}, []int{len(turn1) / BlockSize * BlockSize}},
		{"shorter text within a sent one", map[string][]string{"w2": {turn2}}, sys[:4*BlockSize],
			[]string{"w1", "w2"}, []int{0, 4 * BlockSize}},
		{"partial block matches only a whole equal text", map[string][]string{"w1": {"hello"}}, "hello!",
			[]string{"w1"}, []int{0}},
		{"short text sent before", map[string][]string{"w1": {"hello"}}, "hello", []string{"w1"}, []int{5}},
		{"each worker its own", map[string][]string{"w1": {sys}, "w2": {turn2}}, turn2,
			[]string{"w1", "w2", "w3"}, []int{len(sys) / BlockSize * BlockSize, len(turn2), 0}},
		{"empty text matches nothing", map[string][]string{"w1": {turn1}}, "", []string{"w1"}, []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Config{}).Model([]byte("m"))
			held := map[string]int64{}
			for w, texts := range tt.sent {
				for i, s := range texts {
					m.Insert(wk(w), blocksOf(s), t0.Add(time.Duration(i)*time.Second))
					held[w] = int64(len(s)) // each test's texts of a worker nest
				}
			}
			got := lookup(m, tt.lookup, tt.workers...)
			for i, w := range tt.workers {
				if got[i].Len != tt.want[i] || got[i].Held != held[w] {
					t.Errorf("%s: %+v, want Len %d Held %d", w, got[i], tt.want[i], held[w])
				}
			}
		})
	}
}

// TestMatchedBisection checks the bisection against a walk from the start over entries that
// hold a prefix of a text, whatever its length.
func TestMatchedBisection(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for trial := range 500 {
		n := r.IntN(40)
		b := blocksOf(text(uint64(trial), n*BlockSize+r.IntN(BlockSize)))
		k := 0
		if len(b.Hashes) > 0 {
			k = r.IntN(len(b.Hashes) + 1)
		}
		e := &entry{blocks: map[uint64]int64{}}
		for _, h := range b.Hashes[:k] {
			e.blocks[h] = 1
		}
		e.blocks[blocksOf(text(uint64(trial)+1e6, 3*BlockSize)).Hashes[2]] = 1 // another text's block
		if got := e.matched(b.Hashes); got != k {
			t.Fatalf("trial %d: %d blocks of %d held, matched says %d", trial, k, len(b.Hashes), got)
		}
	}
}

func TestModelsApart(t *testing.T) {
	x := New(Config{})
	s := text(4, 300)
	x.Model([]byte("a")).Insert(wk("w1"), blocksOf(s), t0)
	if got := lookup(x.Model([]byte("b")), s, "w1"); got[0].Len != 0 {
		t.Errorf("model b sees model a's entry: %+v", got[0])
	}
	if got := lookup(x.Model([]byte("a")), s, "w1"); got[0].Len != len(s) {
		t.Errorf("model a lost its entry: %+v", got[0])
	}
	if got := len(x.Models()); got != 2 {
		t.Errorf("%d models, want 2", got)
	}
}

func TestApplyKeepsLatestUse(t *testing.T) {
	m := New(Config{}).Model(nil)
	b := blocksOf(text(5, 2*BlockSize))
	m.Insert(wk("w"), b, t0.Add(time.Minute))
	m.Apply(wk("w"), Delta{Used: b.Uses(t0, nil)}) // an older use, as a late delta brings
	want := Delta{Used: b.Uses(t0.Add(time.Minute), nil)}
	sortUses(want.Used)
	if diff := cmp.Diff(want, m.Snapshot(wk("w"))); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}
}
