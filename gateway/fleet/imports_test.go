package fleet

import (
	"sync"
	"testing"
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

func TestJudge(t *testing.T) {
	rec := Ref{Known: true, Owner: "a", Epoch: 5}
	bul := func(owner string, epoch, seq uint64) *mesh.Bulletin {
		return &mesh.Bulletin{Worker: "w", Owner: owner, Epoch: epoch, Seq: seq}
	}
	tests := []struct {
		name string
		rec  Ref
		last Ref
		b    *mesh.Bulletin
		want Verdict
	}{
		{"first bulletin of the record's owner and epoch", rec, Ref{}, bul("a", 5, 10), Apply},
		{"newer seq", rec, Ref{Known: true, Owner: "a", Epoch: 5, Seq: 10}, bul("a", 5, 11), Apply},
		{"same seq (a relay)", rec, Ref{Known: true, Owner: "a", Epoch: 5, Seq: 10}, bul("a", 5, 10), DropStale},
		{"older seq", rec, Ref{Known: true, Owner: "a", Epoch: 5, Seq: 10}, bul("a", 5, 9), DropStale},
		{"new epoch after an older one, lower seq", rec, Ref{Known: true, Owner: "b", Epoch: 4, Seq: 99}, bul("a", 5, 1), Apply},
		{"another owner at the record's epoch", rec, Ref{}, bul("b", 5, 10), DropEpoch},
		{"the old owner after a failover", rec, Ref{}, bul("b", 4, 1_000), DropEpoch},
		{"the record's owner at an older epoch", rec, Ref{}, bul("a", 3, 1_000), DropEpoch},
		{"a newer epoch than the record: the record lags", rec, Ref{}, bul("c", 6, 1), Hold},
		{"no record yet", Ref{}, Ref{}, bul("a", 5, 1), Hold},
		{"owned here", Ref{Known: true, Owner: "me", Epoch: 5}, Ref{}, bul("a", 5, 1), DropEpoch},
		{"the new owner's first, before the move away from here applied", Ref{Known: true, Owner: "me", Epoch: 5}, Ref{}, bul("a", 6, 1), Hold},
		{"the new owner's first over the state handed over here", rec, Ref{Known: true, Owner: "me", Epoch: 4}, bul("a", 5, 1), Apply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Judge(tt.rec, tt.last, "me", tt.b); got != tt.want {
				t.Errorf("Judge = %v, want %v", got, tt.want)
			}
		})
	}
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// importFixture is a pool reconciled from fake records by a node "me", with an importer.
type importFixture struct {
	t     *testing.T
	recs  *fakeRecords
	pool  *pool.Pool
	r     *Reconciler
	im    *Importer
	clk   *clock
	heard map[string]time.Time
	drops int
}

func newImportFixture(t *testing.T) *importFixture {
	f := &importFixture{t: t, recs: newFakeRecords(), pool: pool.New(pool.Config{StartPending: true}),
		clk: &clock{t: time.Unix(1_800_000_000, 0)}, heard: map[string]time.Time{}}
	f.im = NewImporter(ImporterConfig{NodeID: "me", Pool: f.pool, Now: f.clk.Now, Logger: testkit.Quiet(),
		Heard:        func(o string) time.Time { return f.heard[o] },
		DroppedEpoch: func(n int) { f.drops += n }})
	f.r = New(Config{NodeID: "me", Records: f.recs, Pool: f.pool, Imports: f.im, Logger: testkit.Quiet()})
	return f
}

func (f *importFixture) put(s worker.Spec, owner string, epoch uint64) worker.ID {
	f.recs.put(fsm.Record{ID: s.ID(), Spec: s, Owner: owner, Epoch: epoch})
	f.r.Reconcile()
	return s.ID()
}

func (f *importFixture) routable(id worker.ID) bool {
	for _, w := range f.pool.Snapshot().Routable {
		if w.ID == id {
			return w.Allow()
		}
	}
	return false
}

// An imported worker takes its health and breaker from its owner's bulletins: unknown and not
// routable before the first, out of routing when the owner takes it out, back when it says so.
func TestImportedWorkerFollowsBulletins(t *testing.T) {
	f := newImportFixture(t)
	id := f.put(spec(t, 8001), "a", 5)
	if f.routable(id) {
		t.Fatal("an imported worker is routable before its first bulletin")
	}
	if _, ok := f.im.Imported(id); ok {
		t.Fatal("Imported reports a state before the first bulletin")
	}
	send := func(seq uint64, h health.State, brk breaker.State, reopen time.Duration) {
		f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "a", Epoch: 5, Seq: seq, Health: h,
			Breaker: brk, BreakerReopenIn: reopen, ProbeInterval: time.Second, Models: []string{"m1"}}})
	}
	send(1, health.Ready, breaker.Closed, 0)
	if !f.routable(id) {
		t.Fatal("a ready imported worker is not routable")
	}
	if got := f.pool.Get(id).DiscoveredModels(); !cmp.Equal(got, []string{"m1"}) {
		t.Errorf("discovered models = %v, want [m1]", got)
	}
	send(2, health.NotReady, breaker.Closed, 0)
	if f.routable(id) {
		t.Fatal("a worker its owner took out of routing is still routable")
	}
	send(3, health.Ready, breaker.Closed, 0)
	send(2, health.NotReady, breaker.Closed, 0) // late, dropped
	if !f.routable(id) {
		t.Fatal("a stale bulletin was applied")
	}
	send(4, health.Ready, breaker.Open, 10*time.Second)
	if f.routable(id) {
		t.Fatal("a worker whose owner's breaker is open is routable")
	}
	f.clk.Advance(10 * time.Second)
	if !f.routable(id) {
		t.Fatal("the owner's open breaker does not admit a trial once its timeout passed")
	}
	st, _ := f.im.Imported(id)
	if st.Bulletin.Seq != 4 || st.Bulletin.Breaker != breaker.Open {
		t.Errorf("Imported = %+v, want seq 4, breaker open", st.Bulletin)
	}
}

// TestOwnersVerdictEndsAHungHold: a worker this gateway held after a request to it got no
// answer stays held through bulletins that change neither its health nor its owner's breaker
// state, and is released by the first that changes either: the owner's verdict decides.
func TestOwnersVerdictEndsAHungHold(t *testing.T) {
	tests := []struct {
		name         string
		health       health.State
		brk          breaker.State
		wantReleased bool
	}{
		{"the same verdict keeps the hold", health.Ready, breaker.Closed, false},
		{"the owner opened the circuit", health.Ready, breaker.Open, true},
		{"the owner took it out of routing", health.NotReady, breaker.Closed, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newImportFixture(t)
			id := f.put(spec(t, 8100+i), "a", 5)
			send := func(seq uint64, h health.State, brk breaker.State) {
				f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "a", Epoch: 5, Seq: seq, Health: h,
					Breaker: brk, BreakerReopenIn: time.Minute, BreakerFailures: int(seq), ProbeInterval: time.Second}})
			}
			send(1, health.Ready, breaker.Closed)
			if !f.pool.HoldHung(id, time.Hour) || f.routable(id) {
				t.Fatal("the hold did not take the worker out of routing")
			}
			send(2, tt.health, tt.brk)
			held := f.pool.Get(id).Gates()&pool.GateHung != 0
			if held == tt.wantReleased {
				t.Errorf("held after the bulletin: %v, want %v", held, !tt.wantReleased)
			}
			if f.routable(id) {
				t.Error("routable after the bulletin, which took it out")
			}
			f.pool.ReleaseHung(id) // stops the hold's timer
		})
	}
}

// State not refreshed for three probe intervals is stale and keeps its last value; news from
// the owner (a beat) makes it fresh again.
func TestImportedStateGoesStaleButStays(t *testing.T) {
	f := newImportFixture(t)
	id := f.put(spec(t, 8001), "a", 5)
	f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "a", Epoch: 5, Seq: 1, Health: health.Ready, Breaker: breaker.Closed,
		ProbeInterval: 2 * time.Second}})
	f.clk.Advance(6 * time.Second)
	if st, _ := f.im.Imported(id); st.Stale {
		t.Fatal("stale at exactly three intervals")
	}
	f.clk.Advance(time.Millisecond)
	if st, _ := f.im.Imported(id); !st.Stale {
		t.Fatal("not stale after three intervals without news")
	}
	if !f.routable(id) {
		t.Fatal("a stale ready worker left routing; it must keep its last value")
	}
	if n, stale := f.im.countStale(); n != 1 || stale != 1 {
		t.Errorf("meshgw_mesh_imported_workers, meshgw_mesh_stale_imports = %d, %d; want 1, 1", n, stale)
	}
	f.heard["a"] = f.clk.Now()
	if st, _ := f.im.Imported(id); st.Stale {
		t.Fatal("still stale after the owner was heard from")
	}
	if n, stale := f.im.countStale(); n != 1 || stale != 0 {
		t.Errorf("after news: meshgw_mesh_imported_workers, meshgw_mesh_stale_imports = %d, %d; want 1, 0", n, stale)
	}
}

// A bulletin ahead of the applied record is held and applied once the record arrives; one from
// the old owner after a failover is dropped and counted.
func TestBulletinHeldUntilTheRecordArrives(t *testing.T) {
	f := newImportFixture(t)
	s := spec(t, 8001)
	id := s.ID()
	f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "a", Epoch: 5, Seq: 1, Health: health.Ready}})
	f.put(s, "a", 5)
	if !f.routable(id) {
		t.Fatal("the held bulletin was not applied when its record arrived")
	}
	// Failover to b at epoch 9: a's later bulletins are dropped; b's, held until the record
	// moves, then applied.
	f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "b", Epoch: 9, Seq: 1, Health: health.NotReady}})
	if !f.routable(id) {
		t.Fatal("a bulletin ahead of the record was applied")
	}
	f.put(s, "b", 9)
	if f.routable(id) {
		t.Fatal("the new owner's held bulletin was not applied after the record moved")
	}
	f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "a", Epoch: 5, Seq: 2, Health: health.Ready}})
	if f.routable(id) || f.drops != 1 {
		t.Fatalf("the old owner's bulletin: routable=%v drops=%d; want dropped and counted", f.routable(id), f.drops)
	}
}

// A host-local (ipc://) worker owned elsewhere is never imported, and bulletins for it are
// not applied.
func TestHostLocalWorkersStayLocal(t *testing.T) {
	f := newImportFixture(t)
	ipc := worker.Spec{URL: "ipc:///tmp/engine.sock"}
	if err := ipc.Normalize(); err != nil {
		t.Fatal(err)
	}
	id := f.put(ipc, "a", 5)
	if f.pool.Get(id) != nil {
		t.Fatal("an ipc:// worker owned by another gateway was imported")
	}
	f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "a", Epoch: 5, Seq: 1, Health: health.Ready}})
	if f.pool.Get(id) != nil {
		t.Fatal("a bulletin brought an ipc:// worker into the pool")
	}
	mine := f.put(ipc, "me", 6)
	if f.pool.Get(mine) == nil {
		t.Fatal("an ipc:// worker this gateway owns is not in its pool")
	}
	f.put(ipc, "a", 7) // moved away: it leaves this gateway's pool
	if f.pool.Get(id) != nil {
		t.Fatal("an ipc:// worker moved to another gateway stayed in the pool")
	}
}

// After a failover the new owner starts from the last bulletin it imported.
func TestSeedFromImportedState(t *testing.T) {
	f := newImportFixture(t)
	id := f.put(spec(t, 8001), "a", 5)
	f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "a", Epoch: 5, Seq: 1, Health: health.Ready, Breaker: breaker.Open,
		BreakerFailures: 3, BreakerReopenIn: 30 * time.Second}})
	f.clk.Advance(10 * time.Second)
	got, ok := f.im.Seed(id)
	want := owned.Seed{Health: health.Ready, Breaker: breaker.Open, BreakerFailures: 3, BreakerReopenIn: 20 * time.Second}
	if !ok || got != want {
		t.Fatalf("Seed = %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := f.im.Seed(id); ok {
		t.Fatal("a seed was handed out twice")
	}
}

// A bulletin of unknown health (a state a newer peer added) changes neither the pool's health of
// the worker nor what a new owner is seeded with, and Imported reports the health unknown.
func TestUnknownHealthKeepsThePoolsHealth(t *testing.T) {
	f := newImportFixture(t)
	id := f.put(spec(t, 8001), "a", 5)
	f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "a", Epoch: 5, Seq: 1, Health: health.NotReady, Breaker: breaker.Closed}})
	f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "a", Epoch: 5, Seq: 2, HealthUnknown: true, Breaker: breaker.Closed}})
	if h := f.pool.Get(id).Health(); h != health.NotReady {
		t.Errorf("pool health after a bulletin of unknown health = %v, want not_ready kept", h)
	}
	st, ok := f.im.Imported(id)
	if !ok || st.Bulletin.Seq != 2 || !st.Bulletin.HealthUnknown || st.Bulletin.HealthText() != "" {
		t.Errorf("Imported = %+v, %v; want seq 2 of unknown health", st.Bulletin, ok)
	}
	if _, ok := f.im.Seed(id); ok {
		t.Error("a worker of unknown health was seeded")
	}
}

// A bulletin of unknown breaker state (a state a newer peer added) routes the worker as a closed
// circuit, seeds a new owner closed, and Imported reports the breaker unknown.
func TestUnknownBreakerRoutesClosed(t *testing.T) {
	f := newImportFixture(t)
	id := f.put(spec(t, 8001), "a", 5)
	f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "a", Epoch: 5, Seq: 1, Health: health.Ready, Breaker: breaker.Open,
		BreakerReopenIn: time.Minute}})
	if f.routable(id) {
		t.Fatal("a worker whose owner's breaker is open is routable")
	}
	f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "a", Epoch: 5, Seq: 2, Health: health.Ready, BreakerUnknown: true}})
	if !f.routable(id) {
		t.Error("a ready worker of unknown breaker state is not routable")
	}
	st, ok := f.im.Imported(id)
	if !ok || st.Bulletin.Seq != 2 || !st.Bulletin.BreakerUnknown || st.Bulletin.BreakerText() != "" {
		t.Errorf("Imported = %+v, %v; want seq 2 of unknown breaker state", st.Bulletin, ok)
	}
	seed, ok := f.im.Seed(id)
	if want := (owned.Seed{Health: health.Ready, Breaker: breaker.Closed}); !ok || seed != want {
		t.Errorf("Seed = %+v, %v; want %+v", seed, ok, want)
	}
}

// fakeStatus is an OwnedStatus.
type fakeStatus map[worker.ID]owned.Status

func (s fakeStatus) Status(id worker.ID) (owned.Status, bool) { st, ok := s[id]; return st, ok }

// sink records what the publisher hands on.
type sink struct {
	mu        sync.Mutex
	published []mesh.Bulletin
	withdrawn []string
}

func (s *sink) Publish(b mesh.Bulletin) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.published = append(s.published, b)
}

func (s *sink) Withdraw(w string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.withdrawn = append(s.withdrawn, w)
}

func TestPublisherBuildsBulletins(t *testing.T) {
	p := pool.New(pool.Config{})
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	a := spec(t, 8001)
	ipc := worker.Spec{URL: "ipc:///tmp/e.sock"}
	if err := ipc.Normalize(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []worker.Spec{a, ipc} {
		if _, _, err := p.Upsert(s, pool.OriginLocal); err != nil {
			t.Fatal(err)
		}
	}
	status := fakeStatus{
		a.ID(): {Health: health.Ready, Epoch: 4, Interval: 5 * time.Second, LastError: "HTTP 503", LastStatusCode: 503,
			Breaker: breaker.Snapshot{State: breaker.Open, ConsecutiveFailures: 10, ReopensAt: clk.Now().Add(42 * time.Second)}},
		ipc.ID(): {Health: health.Ready, Epoch: 4},
	}
	out := &sink{}
	NewPublisher(out, p, clk.Now, testkit.Quiet()).Close() // never started: returns at once
	pub := NewPublisher(out, p, clk.Now, testkit.Quiet())
	defer pub.Close()
	pub.Changed(a.ID())
	pub.Changed(ipc.ID())
	pub.Forgotten("w-gone")
	pub.Start(status) // what was noted before is published then
	testkit.For(t, "the publisher to hand on", func() bool {
		out.mu.Lock()
		defer out.mu.Unlock()
		return len(out.published) == 1 && len(out.withdrawn) == 1
	})
	want := mesh.Bulletin{Worker: string(a.ID()), Epoch: 4, Health: health.Ready, Breaker: breaker.Open, BreakerFailures: 10,
		BreakerReopenIn: 42 * time.Second, LastError: "HTTP 503", LastStatusCode: 503, ProbeInterval: 5 * time.Second}
	if diff := cmp.Diff(want, out.published[0]); diff != "" {
		t.Errorf("bulletin (-want +got):\n%s", diff)
	}
	if out.withdrawn[0] != "w-gone" {
		t.Errorf("withdrawn %v, want w-gone", out.withdrawn)
	}
}
