package pool

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// BenchmarkRegisterOneMore adds one worker (pending, as health checks register it) to a pool of
// 1,000 and of 100,000: what a registration costs the data plane's view.
func BenchmarkRegisterOneMore(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p := New(Config{StartPending: true})
			flush := p.Defer()
			for i := range n {
				s := worker.Spec{URL: fmt.Sprintf("http://10.%d.%d.%d:30000", i>>16&255, i>>8&255, i&255)}
				if _, _, err := p.Upsert(s, OriginMesh); err != nil {
					b.Fatal(err)
				}
			}
			flush()
			specs := make([]worker.Spec, b.N)
			for i := range specs {
				specs[i] = worker.Spec{URL: fmt.Sprintf("http://11.%d.%d.%d:30000", i>>16&255, i>>8&255, i&255)}
				_ = specs[i].Normalize()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				p.UpsertRecord(specs[i].ID(), specs[i], OriginMesh, RecordFlags{})
			}
		})
	}
}

// The lists a rebuild merges from a few changes are the ones a rebuild from every worker
// makes: random adds, removes, replacements and gate flips, checked after each.
func TestMergedSnapshotMatchesFullRebuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := New(Config{StartPending: true})
	url := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", 10000+i) }
	for step := range 3000 {
		i := rng.IntN(300)
		id := worker.ID("")
		if w, _, err := p.Upsert(worker.Spec{URL: url(i)}, OriginLocal); err == nil {
			id = w.ID
		}
		switch rng.IntN(5) {
		case 0:
			_ = p.Remove(id)
		case 1:
			_, _ = p.SetHealth(id, health.Ready)
		case 2:
			_, _ = p.SetFlags(id, rng.IntN(2) == 0, false)
		case 3:
			prio := rng.IntN(100)
			_, _, _ = p.Upsert(worker.Spec{URL: url(i), Priority: &prio}, OriginLocal) // a replacement
		case 4:
			flush := p.Defer() // several changes in one rebuild
			for range 1 + rng.IntN(40) {
				j := rng.IntN(300)
				if w, _, err := p.Upsert(worker.Spec{URL: url(j)}, OriginLocal); err == nil {
					_, _ = p.SetHealth(w.ID, health.State(rng.IntN(3)))
				}
			}
			flush()
		}
		s := p.Snapshot()
		var all, routable []*Worker
		p.mu.RLock()
		for _, w := range p.workers {
			all = append(all, w)
			if w.Gates() == 0 {
				routable = append(routable, w)
			}
		}
		p.mu.RUnlock()
		byID := func(a, b *Worker) int { return cmpID(a.ID, b.ID) }
		slices.SortFunc(all, byID)
		slices.SortFunc(routable, byID)
		if !slices.Equal(all, s.All) || !slices.Equal(routable, s.Routable) {
			t.Fatalf("step %d: the merged snapshot differs from a rebuild: %d/%d all, %d/%d routable",
				step, len(s.All), len(all), len(s.Routable), len(routable))
		}
	}
}

func cmpID(a, b worker.ID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
