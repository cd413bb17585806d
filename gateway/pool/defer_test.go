package pool

import (
	"fmt"
	"testing"

	"github.com/meshgw/meshgw/worker"
)

func TestDeferRebuildsOnceAtFlush(t *testing.T) {
	var swaps int
	p := New(Config{OnChange: func() { swaps++ }})
	before := p.Snapshot()

	flush := p.Defer()
	inner := p.Defer() // nested: only the outer flush publishes
	var ids []worker.ID
	for i := range 3 {
		w, changed, err := p.UpsertFlags(worker.Spec{URL: fmt.Sprintf("http://127.0.0.1:%d", 9000+i)}, OriginMesh, i == 2, false)
		if err != nil || !changed {
			t.Fatalf("upsert %d: changed %v, err %v", i, changed, err)
		}
		ids = append(ids, w.ID)
	}
	if err := p.SetOwner(ids[0], "n2", 7); err != nil {
		t.Fatalf("SetOwner inside a Defer: %v", err)
	}
	if got := p.Get(ids[1]); got == nil {
		t.Fatal("Get inside a Defer does not see a worker added in it")
	}
	if err := p.Remove(ids[1]); err != nil {
		t.Fatal(err)
	}
	inner()
	inner() // a second call is a no-op
	if p.Snapshot() != before || swaps != 0 {
		t.Fatalf("snapshot swapped %d times before the outer flush", swaps)
	}
	flush()
	s := p.Snapshot()
	if swaps != 1 || s.Version != before.Version+1 {
		t.Fatalf("after flush: %d swaps, version %d → %d; want one swap", swaps, before.Version, s.Version)
	}
	if len(s.All) != 2 || len(s.Routable) != 1 || s.Routable[0].ID != ids[0] {
		t.Fatalf("after flush: %d workers, routable %v; want 2 workers, only %s routable", len(s.All), s.Routable, ids[0])
	}
	if got := s.Get(ids[0]).Owner(); got != "n2" {
		t.Fatalf("owner %q, want n2", got)
	}

	flush = p.Defer() // a Defer with no change publishes nothing
	flush()
	if swaps != 1 {
		t.Fatalf("an empty Defer swapped the snapshot")
	}
}

// BenchmarkUpsertDeferred is one reconcile pass's worth of upserts into an empty pool: 10,000
// workers, one rebuild at the end.
func BenchmarkUpsertDeferred(b *testing.B) {
	specs := make([]worker.Spec, 10_000)
	for i := range specs {
		specs[i] = worker.Spec{URL: fmt.Sprintf("http://10.%d.%d.%d:8000", i>>16, (i>>8)&255, i&255)}
	}
	b.ReportAllocs()
	for range b.N {
		p := New(Config{})
		flush := p.Defer()
		for _, s := range specs {
			if _, _, err := p.UpsertFlags(s, OriginMesh, false, false); err != nil {
				b.Fatal(err)
			}
		}
		flush()
	}
}

// TestGateFlipReusesTheWorkerSet: a snapshot after a gate flip shares All with the one before
// (nothing was added, removed or replaced) and has the right Routable; an add rebuilds All.
func TestGateFlipReusesTheWorkerSet(t *testing.T) {
	p := New(Config{})
	ws := addN(t, p, 3, nil)
	before := p.Snapshot()
	if _, err := p.SetFlags(ws[1].ID, true, false); err != nil {
		t.Fatal(err)
	}
	after := p.Snapshot()
	if &after.All[0] != &before.All[0] || after.Version != before.Version+1 {
		t.Fatal("a gate flip rebuilt the worker list")
	}
	if len(after.Routable) != 2 || after.Routable[0] == ws[1] || after.Routable[1] == ws[1] || after.Get(ws[1].ID) != ws[1] {
		t.Fatalf("routable %v after disabling %s", after.Routable, ws[1].ID)
	}
	if len(before.Routable) != 3 {
		t.Fatal("the earlier snapshot changed")
	}
	addN(t, p, 4, nil) // the 4th is new; the first three are unchanged upserts
	grown := p.Snapshot()
	if len(grown.All) != 4 || len(grown.Routable) != 3 || &grown.All[0] == &after.All[0] {
		t.Fatalf("after an add: %d workers, %d routable, list reused %v", len(grown.All), len(grown.Routable), &grown.All[0] == &after.All[0])
	}
}
