package ownership

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/leader"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/testkit"
)

// fakeRaft is a raft configuration a test sets.
type fakeRaft struct {
	mu   sync.Mutex
	view RaftView
}

func (r *fakeRaft) View() RaftView {
	r.mu.Lock()
	defer r.mu.Unlock()
	return RaftView{Leader: r.view.Leader, Servers: maps.Clone(r.view.Servers)}
}

func (r *fakeRaft) set(leader string, servers map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.view = RaftView{Leader: leader, Servers: servers}
}

// steps records what the drain duty did to the data plane and the mesh, in order.
type steps struct {
	mu   sync.Mutex
	done []string
}

func (s *steps) add(step string)    { s.mu.Lock(); defer s.mu.Unlock(); s.done = append(s.done, step) }
func (s *steps) get() []string      { s.mu.Lock(); defer s.mu.Unlock(); return slices.Clone(s.done) }
func (s *steps) WithdrawReadiness() { s.add("withdraw readiness") }
func (s *steps) LeaveMesh()         { s.add("close to new requests") }

// drainFixture is gateway g1, about to be drained, and g2, which stays.
type drainFixture struct {
	store   *fsmStore
	members *fakeMembership
	raft    *fakeRaft
	view    DrainView
	started time.Time // g1's process
}

func newDrainFixture(t *testing.T) *drainFixture {
	now := time.Now()
	f := &drainFixture{store: newStore(t, "g1", "g1", "g2"), raft: &fakeRaft{}, started: now}
	f.members = newMembership(Peer{ID: "g1", Status: mesh.StatusAlive, Since: now, Started: now},
		Peer{ID: "g2", Status: mesh.StatusAlive, Since: now, Started: now})
	f.raft.set("g1", map[string]string{"g1": "voter", "g2": "voter"})
	f.view = DrainView{Records: f.store, Membership: f.members, Raft: f.raft.View}
	return f
}

// mark writes g1's drain mark for the process started at started, as POST /mesh/drain does.
func (f *drainFixture) mark(t *testing.T, started time.Time) {
	t.Helper()
	if _, err := f.store.Apply(context.Background(), fsm.OperatorReassign{Reason: "drain", Drain: []string{"g1"},
		Started: map[string]time.Time{"g1": started}, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// moveAll moves every worker g1 owns to g2, as the leader's hand-off does.
func (f *drainFixture) moveAll(t *testing.T) {
	t.Helper()
	var items []fsm.ReassignItem
	for _, r := range f.store.WorkersShared() {
		if r.Owner == "g1" {
			items = append(items, fsm.ReassignItem{ID: r.ID, From: fsm.Fence{Owner: r.Owner, Epoch: r.Epoch}, To: "g2"})
		}
	}
	if _, err := f.store.Apply(context.Background(), fsm.Reassign{Items: items}); err != nil {
		t.Fatal(err)
	}
}

// runDuty runs g1's drain duty for the process started at started until the returned stop.
func (f *drainFixture) runDuty(started time.Time, s *steps, left chan struct{}) (stop func()) {
	caughtUp := make(chan struct{})
	close(caughtUp)
	d := &DrainDuty{Self: "g1", Started: started, View: f.view, Changes: f.store.f.Watch,
		Barrier: func(context.Context) error { return nil }, CaughtUp: caughtUp, Gateway: s,
		Leave: func() { s.add("leave the mesh") }, Logger: testkit.Quiet()}
	return runUntilStopped(func(ctx context.Context) { d.Run(ctx, left) })
}

func (f *drainFixture) clearer() DrainClearer {
	return DrainClearer{View: f.view, Apply: f.store, Logger: testkit.Quiet()}
}

func runUntilStopped(run func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(ctx) }()
	return func() { cancel(); <-done }
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestDrainDutySteps: once g1 is marked draining it hands off; while it still owns a worker or
// leads it stays; once the leadership moved away (a leader change mid-drain) and it owns nothing
// it closes to new requests and leaves the mesh, in that order. The leader's clearer then
// clears its mark once it is gone from the mesh and the configuration.
func TestDrainDutySteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newDrainFixture(t)
		var s steps
		left := make(chan struct{})
		stop := f.runDuty(f.started, &s, left)
		defer stop()
		testkit.Advance(time.Minute)
		if got := s.get(); len(got) != 0 {
			t.Fatalf("steps without a mark: %v", got)
		}

		f.mark(t, f.started)
		synctest.Wait()
		if got := s.get(); !slices.Equal(got, []string{"withdraw readiness"}) {
			t.Fatalf("after the mark: %v, want a hand-off", got)
		}
		f.moveAll(t)
		testkit.Advance(time.Minute)
		if got := s.get(); len(got) != 1 {
			t.Fatalf("left while it leads and holds a voter seat: %v", got)
		}
		// The leadership moves to g2 and g1 is demoted: a configuration change, which has no
		// signal; the duty's poll sees it.
		f.raft.set("g2", map[string]string{"g1": "nonvoter", "g2": "voter"})
		testkit.Advance(drainDutyPoll)
		if got, want := s.get(), []string{"withdraw readiness", "close to new requests", "leave the mesh"}; !slices.Equal(got, want) || !isClosed(left) {
			t.Fatalf("steps %v (left closed: %v), want %v", got, isClosed(left), want)
		}

		// The leader clears the mark once g1 is out of the mesh and of the configuration.
		stopClearer := runUntilStopped(func(ctx context.Context) { leader.Run(ctx, f.clearer()) })
		defer stopClearer()
		synctest.Wait()
		if len(f.store.Draining()) != 1 {
			t.Fatal("the mark was cleared while g1 is still in the mesh")
		}
		f.members.Set(Peer{ID: "g1", Status: mesh.StatusLeft, Since: time.Now(), Started: f.started})
		f.raft.set("g2", map[string]string{"g2": "voter"})
		testkit.Advance(drainClearInterval)
		if marks := f.store.Draining(); len(marks) != 0 {
			t.Fatalf("marks after g1 left: %+v", marks)
		}
	})
}

// TestDrainDutyLeaderChange: a mark the last leader left (its term ended before the drain
// finished) is cleared by the next leader's clearer at the start of its term.
func TestDrainDutyLeaderChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newDrainFixture(t)
		f.mark(t, f.started)
		f.moveAll(t)
		var loop leader.Loop
		loop.Set(f.clearer())
		stopTerm := runUntilStopped(loop.Run)
		testkit.Advance(time.Minute)
		stopTerm() // the leadership is lost mid-drain
		if len(f.store.Draining()) != 1 {
			t.Fatal("a drain that is not over was cleared")
		}
		// g1 finished its drain while there was no leader: nobody clears the mark until the next
		// term starts, and then at once.
		f.members.Set(Peer{ID: "g1", Status: mesh.StatusLeft, Since: time.Now(), Started: f.started})
		f.raft.set("g2", map[string]string{"g2": "voter"})
		testkit.Advance(time.Minute)
		if len(f.store.Draining()) != 1 {
			t.Fatal("a mark was cleared without a leader")
		}
		stopTerm = runUntilStopped(loop.Run)
		defer stopTerm()
		synctest.Wait()
		if marks := f.store.Draining(); len(marks) != 0 {
			t.Fatalf("the next leader left the mark: %+v", marks)
		}
	})
}

// TestDrainDutyRestarted: g1 started again with the same id while its mark names the process
// before: the new process does not take the mark for itself (no hand-off, it stays), and the
// leader clears the mark, so that g1 joins as a new gateway.
func TestDrainDutyRestarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newDrainFixture(t)
		f.mark(t, f.started)
		testkit.Advance(time.Minute)
		again := time.Now() // the new process of g1
		f.members.Set(Peer{ID: "g1", Status: mesh.StatusAlive, Since: again, Started: again})
		var s steps
		left := make(chan struct{})
		stop := f.runDuty(again, &s, left)
		defer stop()
		testkit.Advance(time.Minute)
		if got := s.get(); len(got) != 0 || isClosed(left) {
			t.Fatalf("the restarted process took the old mark: %v", got)
		}
		stopClearer := runUntilStopped(func(ctx context.Context) { leader.Run(ctx, f.clearer()) })
		defer stopClearer()
		synctest.Wait()
		if marks := f.store.Draining(); len(marks) != 0 {
			t.Fatalf("marks after g1 started again: %+v", marks)
		}
		testkit.Advance(time.Minute)
		if got := s.get(); len(got) != 0 {
			t.Fatalf("steps of the restarted process: %v", got)
		}
	})
}
