package fleet

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// switchProber passes every probe until failing is set, then fails them.
type switchProber struct{ failing atomic.Bool }

func (p *switchProber) Probe(context.Context, health.Target) error {
	if p.failing.Load() {
		return errors.New("HTTP 503")
	}
	return nil
}

// handingGateway is one gateway wired as main wires it: reconciler, health manager and
// importer over one pool, the manager seeded from the importer and handing its state over to
// it.
type handingGateway struct {
	recs   *fakeRecords
	pool   *pool.Pool
	m      *owned.Manager
	im     *Importer
	r      *Reconciler
	prober *switchProber
}

// startHandingGateway starts gateway nodeID on recs, probing every second with F=2; its
// breaker opens after 3 failures and stays open for an hour. caughtUp is its Config.CaughtUp.
// Call it inside the synctest bubble.
func startHandingGateway(t *testing.T, nodeID string, recs *fakeRecords, caughtUp <-chan struct{}) *handingGateway {
	t.Helper()
	g := &handingGateway{recs: recs, pool: pool.New(pool.Config{StartPending: true}), prober: &switchProber{}}
	g.im = NewImporter(ImporterConfig{NodeID: nodeID, Pool: g.pool, Logger: testkit.Quiet()})
	hc := health.DefaultConfig()
	hc.CheckIntervalSecs, hc.FailureThreshold = 1, 2
	bc := breaker.DefaultConfig()
	bc.FailureThreshold, bc.Timeout = 3, time.Hour
	m, err := owned.New(owned.Options{Pool: g.pool, NodeID: nodeID, Health: hc, Breaker: bc, Logger: testkit.Quiet(),
		Probers: map[string]health.Prober{worker.ModeHTTP: g.prober}, Seed: g.im.Seed, OnDisown: g.im.ImportDisowned})
	if err != nil {
		t.Fatal(err)
	}
	g.m = m
	g.r = New(Config{NodeID: nodeID, Records: recs, Pool: g.pool, Owner: m, Imports: g.im, CaughtUp: caughtUp, Logger: testkit.Quiet()})
	g.r.Start()
	t.Cleanup(func() { g.r.Stop(); m.Close() })
	return g
}

// routes reports whether the data plane would pick worker id: it is among the snapshot's
// candidates, as selection reads them for every request.
func (g *handingGateway) routes(id worker.ID) bool {
	for _, w := range g.pool.Snapshot().Candidates(nil, 0, nil, nil) {
		if w.ID == id {
			return true
		}
	}
	return false
}

// TestFormerOwnerKeepsStateUntilNewOwnersBulletin: a gateway whose worker moves to another
// owner (a transfer, a drain's handoff, a failover it applies late) keeps routing it by the
// runtime state it had as owner, an open circuit open and a not_ready worker out of routing,
// until the new owner's first bulletin at the new epoch replaces it (DESIGN.md section 5, the
// mirror image of the new owner's seed). Without a bulletin the handed-over state goes stale
// after three probe intervals, as any import does, and keeps its value (fail-static).
func TestFormerOwnerKeepsStateUntilNewOwnersBulletin(t *testing.T) {
	tests := []struct {
		name string
		// open opens the worker's circuit with failed requests; otherwise its probes fail
		// until it is not_ready.
		open bool
		// restored: the former owner restarted and has not caught up with raft (CaughtUp
		// open) when it applies the move: the fence stops its checks, the pool keeps its view.
		restored   bool
		wantHealth health.State
	}{
		{name: "open circuit", open: true, wantHealth: health.Ready},
		{name: "not_ready worker", wantHealth: health.NotReady},
		{name: "open circuit, former owner restored before raft caught up", open: true, restored: true, wantHealth: health.Ready},
		{name: "not_ready worker, former owner restored before raft caught up", restored: true, wantHealth: health.NotReady},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				recs := newFakeRecords()
				s := spec(t, 8001, func(s *worker.Spec) { s.Model = "m" }) // declared: no model discovery
				id := s.ID()
				recs.put(fsm.Record{ID: id, Spec: s, Owner: "n1", Epoch: 5})
				var caughtUp chan struct{}
				if tt.restored {
					caughtUp = make(chan struct{})
				}
				g := startHandingGateway(t, "n1", recs, caughtUp)
				synctest.Wait()
				if !g.routes(id) {
					t.Fatal("the owner does not route its worker after a passing first probe")
				}
				if tt.open {
					for range 3 {
						g.m.OnOutcome(g.pool.Get(id), 0, true)
					}
				} else {
					g.prober.failing.Store(true)
					testkit.Advance(2 * time.Second)
				}
				if g.routes(id) {
					t.Fatal("the owner routes its broken worker")
				}

				// The worker moves to n2; n1 applies it before any bulletin of n2's.
				recs.update(id, func(r *fsm.Record) { r.Owner, r.Epoch = "n2", 6 })
				recs.signal()
				synctest.Wait()
				if g.routes(id) {
					t.Fatal("right after handing the worker over, before the new owner's first bulletin, the former owner routes it")
				}
				st, ok := g.im.Imported(id)
				if !ok || st.Bulletin.HealthUnknown || st.Bulletin.Health != tt.wantHealth ||
					(st.Bulletin.Breaker == breaker.Open) != tt.open || st.Stale {
					t.Fatalf("imported state after the hand-over = %+v, %v; want health %s, breaker open %v, not stale",
						st, ok, tt.wantHealth, tt.open)
				}
				if tt.restored {
					close(caughtUp) // the pass applies the move to the pool: the state stays
					synctest.Wait()
					if w := g.pool.Get(id); w == nil || w.Origin != pool.OriginMesh || g.routes(id) {
						t.Fatalf("once caught up the former owner holds %v, routes it %v; want imported, not routed", w, g.routes(id))
					}
				}

				// No bulletin for three probe intervals: stale, and still out of routing.
				testkit.Advance(3*time.Second + time.Millisecond)
				if st, _ := g.im.Imported(id); !st.Stale {
					t.Error("the handed-over state is not stale after three probe intervals without the new owner's bulletin")
				}
				if n, stale := g.im.countStale(); n != 1 || stale != 1 {
					t.Errorf("meshgw_mesh_imported_workers, meshgw_mesh_stale_imports = %d, %d; want 1, 1", n, stale)
				}
				if g.routes(id) {
					t.Fatal("stale handed-over state lost its value (fail-static)")
				}

				// The new owner's first bulletin replaces it.
				g.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "n2", Epoch: 6, Seq: 1, Health: health.Ready,
					Breaker: breaker.Closed, ProbeInterval: time.Second}})
				if !g.routes(id) {
					t.Fatal("the new owner's first bulletin (ready, closed) did not replace the handed-over state")
				}
				if st, _ := g.im.Imported(id); st.Bulletin.Owner != "n2" || st.Stale {
					t.Errorf("imported state after the new owner's bulletin = %+v; want n2's, fresh", st)
				}
			})
		})
	}
}

// A new owner's bulletin that arrived before the former owner applied the move (held for the
// record) wins over the state handed over when the move applies.
func TestImportDisownedYieldsToNewOwnersHeldBulletin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		recs := newFakeRecords()
		s := spec(t, 8001, func(s *worker.Spec) { s.Model = "m" })
		id := s.ID()
		recs.put(fsm.Record{ID: id, Spec: s, Owner: "n1", Epoch: 5})
		g := startHandingGateway(t, "n1", recs, nil)
		synctest.Wait()
		for range 3 {
			g.m.OnOutcome(g.pool.Get(id), 0, true)
		}
		g.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "n2", Epoch: 6, Seq: 1, Health: health.Ready, Breaker: breaker.Closed}})
		if g.routes(id) {
			t.Fatal("a bulletin ahead of the record applied")
		}
		recs.update(id, func(r *fsm.Record) { r.Owner, r.Epoch = "n2", 6 })
		recs.signal()
		synctest.Wait()
		if !g.routes(id) {
			t.Fatal("the new owner's held bulletin (ready, closed) lost to the state handed over")
		}
		if st, _ := g.im.Imported(id); st.Bulletin.Owner != "n2" || st.Bulletin.Seq != 1 {
			t.Errorf("imported state = %+v; want n2's bulletin", st.Bulletin)
		}
	})
}

// The state a former owner hands over: shown as imported from itself at its epoch, never
// refreshed by news of its own (so stale after three probe intervals), handed back by Seed if
// the worker returns first, and never written over a newer owner's bulletin.
func TestImportDisownedState(t *testing.T) {
	open := owned.Status{Health: health.Ready, Epoch: 5, Interval: time.Second, LastError: "HTTP 500", LastStatusCode: 500,
		Breaker: breaker.Snapshot{State: breaker.Open, ConsecutiveFailures: 3}}
	f := newImportFixture(t)
	s := spec(t, 8001)
	id := f.put(s, "me", 5)
	_, _ = f.pool.SetHealth(id, health.Ready)
	f.put(s, "a", 6) // moved away; this fixture has no Owner to hand over, so the test does
	open.Breaker.ReopensAt = f.clk.Now().Add(30 * time.Second)
	f.im.ImportDisowned(id, open)
	if f.routable(id) {
		t.Fatal("a worker handed over with an open circuit is routable")
	}
	st, ok := f.im.Imported(id)
	want := mesh.Bulletin{Worker: string(id), Owner: "me", Epoch: 5, Health: health.Ready, Breaker: breaker.Open, BreakerFailures: 3,
		BreakerReopenIn: 30 * time.Second, LastError: "HTTP 500", LastStatusCode: 500, ProbeInterval: time.Second}
	if diff := cmp.Diff(want, st.Bulletin); !ok || diff != "" {
		t.Fatalf("Imported after the hand-over (-want +got):\n%s", diff)
	}
	f.heard["me"] = f.clk.Now().Add(time.Hour) // this gateway always hears itself: that refreshes nothing
	f.clk.Advance(3*time.Second + time.Millisecond)
	if st, _ := f.im.Imported(id); !st.Stale {
		t.Error("handed-over state not stale after three probe intervals")
	}
	if got, ok := f.im.Seed(id); !ok || got.Breaker != breaker.Open || got.BreakerReopenIn != 27*time.Second-time.Millisecond {
		t.Errorf("Seed of the handed-over state = %+v, %v; want open, reopening in 27s", got, ok)
	}

	// A bulletin of the new owner applied first is kept.
	f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "a", Epoch: 6, Seq: 1, Health: health.Ready, Breaker: breaker.Closed}})
	f.im.ImportDisowned(id, open)
	if st, _ := f.im.Imported(id); st.Bulletin.Owner != "a" || !f.routable(id) {
		t.Errorf("after a late hand-over: imported %+v, routable %v; want a's bulletin kept", st.Bulletin, f.routable(id))
	}
}
