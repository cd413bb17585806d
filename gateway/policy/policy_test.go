package policy

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/worker"
)

func workers(t testing.TB, n int) []*pool.Worker {
	t.Helper()
	p := pool.New(pool.Config{})
	for i := 0; i < n; i++ {
		if _, _, err := p.Upsert(worker.Spec{URL: "http://127.0.0.1:" + strconv.Itoa(10000+i)}, pool.OriginLocal); err != nil {
			t.Fatal(err)
		}
	}
	return p.Snapshot().Routable
}

func mustNew(t testing.TB, name string, o Options) Policy {
	t.Helper()
	p, err := New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func count(p Policy, c []*pool.Worker, picks int, req func(i int) *Request) map[*pool.Worker]int {
	got := map[*pool.Worker]int{}
	for i := 0; i < picks; i++ {
		got[p.Pick(c, req(i))]++
	}
	return got
}

func noReq(int) *Request { return &Request{} }

func TestRoundRobinEven(t *testing.T) {
	c := workers(t, 5)
	got := count(mustNew(t, RoundRobin, Options{}), c, 500, noReq)
	for _, w := range c {
		if got[w] != 100 {
			t.Errorf("worker %s got %d picks, want exactly 100", w.ID, got[w])
		}
	}
}

func TestRandomRoughlyEven(t *testing.T) {
	c := workers(t, 4)
	got := count(mustNew(t, Random, Options{Seed: 42}), c, 40000, noReq)
	for _, w := range c {
		if got[w] < 9000 || got[w] > 11000 {
			t.Errorf("worker %s got %d of 40000 picks, want about 10000", w.ID, got[w])
		}
	}
}

func TestLeastRequestFollowsInflight(t *testing.T) {
	c := workers(t, 3)
	p := mustNew(t, LeastRequest, Options{})
	// Load: c[0]=3, c[1]=1, c[2]=2 → every pick is c[1].
	for i, n := range []int{3, 1, 2} {
		for j := 0; j < n; j++ {
			c[i].Acquire()
		}
	}
	for i := 0; i < 10; i++ {
		if w := p.Pick(c, nil); w != c[1] {
			t.Fatalf("pick %d: got %s (inflight %d), want the least loaded %s", i, w.ID, w.Inflight(), c[1].ID)
		}
	}
	// Picking and acquiring keeps the loads level: 6 more requests end at 4,4,4.
	for i := 0; i < 6; i++ {
		p.Pick(c, nil).Acquire()
	}
	for _, w := range c {
		if w.Inflight() != 4 {
			t.Errorf("worker %s inflight %d, want 4 after leveling", w.ID, w.Inflight())
		}
	}
}

func TestPowerOfTwoPrefersLessLoaded(t *testing.T) {
	c := workers(t, 2)
	for i := 0; i < 5; i++ {
		c[0].Acquire()
	}
	got := count(mustNew(t, PowerOfTwo, Options{Seed: 7}), c, 1000, noReq)
	if got[c[1]] != 1000 {
		t.Fatalf("with two workers both are sampled; the idle one must win every pick, got %d/1000", got[c[1]])
	}
	// With 10 workers and one hot, the hot one is picked far less than 1/10 of the time.
	c = workers(t, 10)
	for i := 0; i < 5; i++ {
		c[3].Acquire()
	}
	got = count(mustNew(t, PowerOfTwo, Options{Seed: 7}), c, 10000, noReq)
	if got[c[3]] != 0 {
		t.Errorf("hot worker picked %d times; it loses every comparison", got[c[3]])
	}
}

func keyReq(i int) *Request { return &Request{RoutingKey: []byte("user-" + strconv.Itoa(i))} }

func TestConsistentHashingStableAndMinimalMoves(t *testing.T) {
	const keys = 10000
	for _, n := range []int{4, 10, 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			all := workers(t, n+1)
			before, after := all[:n], all
			p := mustNew(t, ConsistentHashing, Options{})
			moved := 0
			for i := 0; i < keys; i++ {
				a := p.Pick(before, keyReq(i))
				if again := p.Pick(before, keyReq(i)); again != a {
					t.Fatalf("key %d mapped to %s then %s", i, a.ID, again.ID)
				}
				b := p.Pick(after, keyReq(i))
				if a != b {
					moved++
					if b != all[n] {
						t.Fatalf("key %d moved between two old workers", i)
					}
				}
			}
			frac, ideal := float64(moved)/keys, 1.0/float64(n+1)
			if frac < 0.5*ideal || frac > 1.5*ideal {
				t.Errorf("adding a worker to %d moved %.3f of keys, want about %.3f", n, frac, ideal)
			}
		})
	}
}

func TestConsistentHashingNoKeyFallsBackToRoundRobin(t *testing.T) {
	c := workers(t, 3)
	got := count(mustNew(t, ConsistentHashing, Options{}), c, 300, noReq)
	for _, w := range c {
		if got[w] != 100 {
			t.Errorf("without a key: worker %s got %d, want 100 (round robin)", w.ID, got[w])
		}
	}
}

func TestPrefixHashStableOnEqualPrefixes(t *testing.T) {
	c := workers(t, 8)
	p := mustNew(t, PrefixHash, Options{PrefixUnits: 4}) // 16 bytes
	spread := map[*pool.Worker]bool{}
	for i := 0; i < 200; i++ {
		prefix := fmt.Sprintf("[{\"content\":%04d", i) // 16 bytes
		a := p.Pick(c, &Request{Prompt: []byte(prefix + " tail one")})
		b := p.Pick(c, &Request{Prompt: []byte(prefix + " another tail, longer")})
		if a != b {
			t.Fatalf("prefix %q: %s and %s differ although the first 16 bytes are equal", prefix, a.ID, b.ID)
		}
		spread[a] = true
	}
	if len(spread) < 6 {
		t.Errorf("200 distinct prefixes reached only %d of 8 workers", len(spread))
	}
}

func TestNewRejectsUnknown(t *testing.T) {
	if _, err := New("fastest", Options{}); err == nil {
		t.Fatal("New(fastest) succeeded")
	}
	for _, n := range Names() {
		if p := mustNew(t, n, Options{}); p.Name() != n {
			t.Errorf("New(%s).Name() = %s", n, p.Name())
		}
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	c := workers(t, 100)
	req := &Request{RoutingKey: []byte("some-key"), Prompt: []byte(`[{"role":"user","content":"hi"}]`)}
	for _, n := range Names() {
		if n == CacheAware && raceEnabled {
			continue
		}
		p := mustNew(t, n, Options{})
		if a := testing.AllocsPerRun(200, func() { p.Pick(c, req) }); a != 0 {
			t.Errorf("%s: %.1f allocations per Pick, want 0", n, a)
		}
	}
}

func BenchmarkPick(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		c := workers(b, n)
		req := &Request{RoutingKey: []byte("user-1234"), Prompt: []byte(`[{"role":"user","content":"Tell me a story about a gateway."}]`)}
		for _, name := range Names() {
			p := mustNew(b, name, Options{})
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					p.Pick(c, req)
				}
			})
		}
	}
}
