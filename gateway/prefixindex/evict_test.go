package prefixindex

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestDue(t *testing.T) {
	x := New(Config{EvictionInterval: time.Minute, MaxChars: 10 * BlockSize})
	if x.Due(t0) {
		t.Fatal("due at the first call: the interval counts from there")
	}
	if x.Due(t0.Add(59 * time.Second)) {
		t.Fatal("due before the interval passed")
	}
	if !x.Due(t0.Add(time.Minute)) {
		t.Fatal("not due once the interval passed")
	}
	if x.Due(t0.Add(2 * time.Minute)) {
		t.Fatal("due again while the claimed eviction runs")
	}
	x.Evict(t0.Add(2 * time.Minute))
	if x.Due(t0.Add(2*time.Minute + 59*time.Second)) {
		t.Fatal("due before the interval passed since the last eviction")
	}
	// Passing twice the bound makes an eviction due at once.
	x.Model(nil).Insert(wk("w"), blocksOf(text(1, 21*BlockSize)), t0.Add(3*time.Minute))
	if !x.Due(t0.Add(3 * time.Minute)) {
		t.Fatal("not due with a model over twice its bound")
	}
	x.Evict(t0.Add(3 * time.Minute))
	if got := x.Model(nil).Size(); got > 10*BlockSize {
		t.Fatalf("size %d after eviction, bound %d", got, 10*BlockSize)
	}
	if x.Due(t0.Add(3*time.Minute + time.Second)) {
		t.Fatal("still due after the eviction")
	}

	never := New(Config{EvictionInterval: -1, MaxChars: BlockSize})
	never.Due(t0)
	if never.Due(t0.Add(24 * time.Hour)) {
		t.Fatal("a negative interval made an eviction due by time")
	}
}

func TestEvictLeastRecentlyUsedFirst(t *testing.T) {
	x := New(Config{MaxChars: 30 * BlockSize})
	m := x.Model(nil)
	old, mid, recent := text(1, 10*BlockSize), text(2, 10*BlockSize), text(3, 10*BlockSize)
	m.Insert(wk("w1"), blocksOf(old), t0)
	m.Insert(wk("w2"), blocksOf(mid), t0.Add(time.Second))
	m.Insert(wk("w1"), blocksOf(recent), t0.Add(2*time.Second))
	m.Insert(wk("w3"), blocksOf(old[:5*BlockSize]), t0.Add(3*time.Second)) // 35 blocks now
	x.Evict(t0.Add(4 * time.Second))
	if got := m.Size(); got != 30*BlockSize {
		t.Fatalf("size %d, want exactly the bound %d", got, 30*BlockSize)
	}
	// The 5 oldest blocks went: the last 5 of w1's first text, deepest first.
	want := map[string][2]int{ // worker → Match.Len of old, of recent
		"w1": {5 * BlockSize, 10 * BlockSize},
		"w2": {0, 0},
		"w3": {5 * BlockSize, 0},
	}
	for w, lens := range want {
		got := lookup(m, old, w)[0].Len
		gotRecent := lookup(m, recent, w)[0].Len
		if got != lens[0] || gotRecent != lens[1] {
			t.Errorf("%s: old %d, recent %d; want %v", w, got, gotRecent, lens)
		}
	}
	if got := lookup(m, mid, "w2")[0].Len; got != len(mid) {
		t.Errorf("w2 lost its text: %d", got)
	}
}

// TestBoundedUnderFlood inserts a hundred times the bound, running evictions as Due asks, and
// checks the index never holds more than twice the bound and holds at most the bound after
// each eviction, with its block count and workers following.
func TestBoundedUnderFlood(t *testing.T) {
	const bound = 64 * 1024
	x := New(Config{MaxChars: bound, EvictionInterval: time.Second})
	m := x.Model([]byte("m"))
	now := t0
	workers := []Worker{1, 2, 3, 4}
	var b Blocks
	sent := 0
	for i := 0; sent < 100*bound; i++ {
		now = now.Add(10 * time.Millisecond)
		b.SetText([]byte(text(uint64(i), 1000+i%3000)))
		m.Insert(workers[i%len(workers)], &b, now)
		sent += b.Len
		if size := m.Size(); size > 2*bound+int64(b.Len) {
			t.Fatalf("after %d bytes sent the model holds %d, over twice the bound %d", sent, size, bound)
		}
		if x.Due(now) {
			x.Evict(now)
			if size := m.Size(); size > bound {
				t.Fatalf("after an eviction the model holds %d, bound %d", size, bound)
			}
		}
	}
	x.Evict(now)
	m.mu.RLock()
	defer m.mu.RUnlock()
	blocks, size := 0, int64(0)
	for _, e := range m.workers {
		blocks += len(e.blocks)
		size += e.size
		if e.peak > 4*bound/BlockSize {
			t.Errorf("an entry's map peaked at %d blocks, more than the bound allows", e.peak)
		}
	}
	if size != m.size || blocks != m.blocks || size > bound {
		t.Errorf("entries hold %d bytes in %d blocks; model counts %d in %d; bound %d", size, blocks, m.size, m.blocks, bound)
	}
}

func TestEvictDropsEmptyEntries(t *testing.T) {
	x := New(Config{MaxChars: 4 * BlockSize})
	m := x.Model(nil)
	m.Insert(wk("gone"), blocksOf(text(1, 4*BlockSize)), t0)
	m.Insert(wk("kept"), blocksOf(text(2, 4*BlockSize)), t0.Add(time.Second))
	x.Evict(t0.Add(2 * time.Second))
	m.mu.RLock()
	_, gone := m.workers[wk("gone")]
	m.mu.RUnlock()
	if gone || m.Held(wk("kept")) != 4*BlockSize {
		t.Errorf("entry of gone kept: %v; kept holds %d", gone, m.Held(wk("kept")))
	}
}

// TestCutAt checks the selection against a sort.
func TestCutAt(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for trial := range 2000 {
		n := 1 + r.IntN(200)
		us := make([]use, n)
		var total int64
		for i := range us {
			us[i] = use{last: int64(r.IntN(50)), n: int64(1 + r.IntN(BlockSize))}
			total += us[i].n
		}
		want := 1 + r.Int64N(total+10)
		sorted := slices.Clone(us)
		slices.SortFunc(sorted, func(a, b use) int { return int(a.last - b.last) })
		expect := sorted[len(sorted)-1].last
		var sum int64
		for _, u := range sorted {
			sum += u.n
			if sum >= want {
				expect = u.last
				break
			}
		}
		if got := cutAt(us, want); got != expect {
			t.Fatalf("trial %d: cutAt = %d, want %d", trial, got, expect)
		}
	}
}
