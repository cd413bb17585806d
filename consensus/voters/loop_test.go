package voters_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/consensus/voters/voterstest"
	"github.com/meshgw/meshgw/leader"
	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/testkit"
)

// fakeNode keeps a raft configuration in memory and applies changes to it as raft does,
// refusing a change planned on a stale index. While hold is open, futures do not resolve.
type fakeNode struct {
	mu      sync.Mutex
	cfg     raft.Configuration
	index   uint64
	applied []voters.Change
	hold    chan struct{}
}

func (f *fakeNode) ID() string { return "n1" }

func (f *fakeNode) Configuration() (raft.Configuration, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg, f.index, nil
}

func (f *fakeNode) ChangeMembership(c voters.Change, prevIndex uint64, _ time.Duration) raft.IndexFuture {
	f.mu.Lock()
	defer f.mu.Unlock()
	if prevIndex != f.index {
		return failedFuture{errors.New("configuration changed")}
	}
	cfg, err := applyChange(f.cfg, c)
	if err != nil {
		return failedFuture{err}
	}
	f.cfg, f.index = cfg, f.index+1
	f.applied = append(f.applied, c)
	return heldFuture{index: f.index, hold: f.hold}
}

func (f *fakeNode) changes() []voters.Change {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.applied)
}

// failedFuture is a raft.IndexFuture that has already failed.
type failedFuture struct{ err error }

func (f failedFuture) Error() error  { return f.err }
func (f failedFuture) Index() uint64 { return 0 }

// heldFuture resolves once hold is closed (at once when it is nil).
type heldFuture struct {
	index uint64
	hold  chan struct{}
}

func (f heldFuture) Error() error {
	if f.hold != nil {
		<-f.hold
	}
	return nil
}

func (f heldFuture) Index() uint64 { return f.index }

// runReconciler runs r as a leader's only duty until the returned stop is called, which waits
// for it to return.
func runReconciler(r *voters.Reconciler) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		leader.Run(ctx, r)
	}()
	return func() { cancel(); <-done }
}

func TestReconcilerPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logbuf.Buffer
		m := voterstest.NewMembership(alive("n1", "a"))
		node := &fakeNode{cfg: conf(voter("n1")), index: 1}
		// --raft-voters 3, so that two gateways promote: the count is not what this tests.
		r, err := voters.NewReconciler(voters.Config{Node: node, Membership: m, Voters: 3, Logger: logs.Logger(slog.LevelInfo)})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		stop := runReconciler(r)
		defer stop()

		// A pass at once, which changes nothing.
		synctest.Wait()
		if n := r.Passes(); n != 1 || len(node.changes()) != 0 {
			t.Fatalf("at the start: %d passes, changes %+v; want 1 pass and no change", n, node.changes())
		}

		// A signal: one pass adds n2, the next promotes it, a third finds nothing to do. No
		// time passes: no pass waits for the interval.
		m.Set(alive("n2", "b"))
		synctest.Wait()
		if diff := cmp.Diff([]voters.Change{add("n2"), promote("n2")}, node.changes(), ignoreReason); diff != "" {
			t.Fatalf("changes (-want +got):\n%s", diff)
		}
		if n := r.Passes(); n != 4 {
			t.Fatalf("%d passes; want 4", n)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("%s passed", d)
		}
		if got := logs.Lines("raft membership changed", "change=promote", "server=n2", "reason="); len(got) != 1 {
			t.Fatalf("promotion log lines: %q\n%s", got, logs.String())
		}

		// No signal: a full pass every interval, and only then.
		testkit.Advance(voters.DefaultReconcileInterval - time.Nanosecond)
		if n := r.Passes(); n != 4 {
			t.Fatalf("%d passes before the interval; want 4", n)
		}
		testkit.Advance(time.Nanosecond)
		if n := r.Passes(); n != 5 {
			t.Fatalf("%d passes after the interval; want 5", n)
		}
		if n := len(node.changes()); n != 2 {
			t.Fatalf("%d changes; a pass over an unchanged view changed something", n)
		}
	})
}

func TestReconcilerChangeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logbuf.Buffer
		m := voterstest.NewMembership(alive("n1", "a"))
		node := &fakeNode{cfg: conf(voter("n1")), index: 1, hold: make(chan struct{})}
		r, err := voters.NewReconciler(voters.Config{Node: node, Membership: m, Logger: logs.Logger(slog.LevelInfo), ChangeTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		stop := runReconciler(r)
		defer stop()
		synctest.Wait()

		// The change is handed over but never commits: the pass gives up after ChangeTimeout,
		// and signals sent meanwhile do not block their sender.
		m.Set(alive("n2", "b"))
		synctest.Wait()
		for range 3 {
			m.Set(alive("n2", "b"))
		}
		before := r.Passes()
		testkit.Advance(5*time.Second - time.Nanosecond)
		if n := r.Passes(); n != before {
			t.Fatalf("the pass ended before the change timeout (%d passes, was %d)", n, before)
		}
		testkit.Advance(time.Nanosecond)
		if got := logs.Lines("raft membership change failed", "change=add-nonvoter", "server=n2", "did not commit in time"); len(got) != 1 {
			t.Fatalf("failure log lines: %q\n%s", got, logs.String())
		}
		close(node.hold) // raft resolves the future in the end; the waiting goroutine ends
		synctest.Wait()
	})
}

func TestReconcilerNeedsNodeAndMembership(t *testing.T) {
	if _, err := voters.NewReconciler(voters.Config{Membership: voterstest.NewMembership()}); err == nil {
		t.Fatal("a reconciler without a Node was made")
	}
	if _, err := voters.NewReconciler(voters.Config{Node: &fakeNode{}}); err == nil {
		t.Fatal("a reconciler without a Membership was made")
	}
}

// unreachableNode is a fakeNode whose leader cannot reach the peers it lists by raft.
type unreachableNode struct {
	*fakeNode
	mu  sync.Mutex
	ids map[string]bool
}

func (u *unreachableNode) RaftUnreachable(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ids[id]
}

// RaftPending is false: a peer the node has not reached has failed to answer.
func (u *unreachableNode) RaftPending(string) bool { return false }

// RaftContact never signals.
func (u *unreachableNode) RaftContact() <-chan struct{} { return nil }

func (u *unreachableNode) set(id string, unreachable bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ids[id] = unreachable
}

// A pass marks the peers its node cannot reach by raft, so that rule 8 does not promote one;
// once the heartbeats reach it again, a pass within unreachableRecheck does.
func TestReconcilerSkipsUnreachablePeers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := voterstest.NewMembership(alive("n1", "a"), alive("n2", "a"))
		node := &unreachableNode{fakeNode: &fakeNode{cfg: conf(voter("n1"), nonvoter("n2")), index: 1},
			ids: map[string]bool{"n2": true}}
		r, err := voters.NewReconciler(voters.Config{Node: node, Membership: m, Voters: 3, Logger: testkit.Quiet()})
		if err != nil {
			t.Fatal(err)
		}
		stop := runReconciler(r)
		defer stop()
		synctest.Wait()
		if got := node.changes(); len(got) != 0 {
			t.Fatalf("changes %+v while n2 is unreachable; want none", got)
		}
		// Heartbeats resume with no membership event (a gateway started again at once): a
		// pass runs again within unreachableRecheck, not at the next full pass.
		node.set("n2", false)
		testkit.Advance(voters.UnreachableRecheck)
		if diff := cmp.Diff([]voters.Change{promote("n2")}, node.changes(), ignoreReason); diff != "" {
			t.Fatalf("changes once n2 is reached (-want +got):\n%s", diff)
		}
	})
}

// contactNode is an unreachableNode that signals when its raft reaches a peer, as a Node does
// at a peer's first answer.
type contactNode struct {
	*unreachableNode
	contact chan struct{}
}

func (c *contactNode) RaftContact() <-chan struct{} { return c.contact }

// A joined non-voter is promoted as soon as the leader's raft first reaches it: the contact
// wakes the reconciler, which does not wait for its recheck.
func TestReconcilerPromotesAtFirstContact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := voterstest.NewMembership(alive("n1", "a"), alive("n2", "a"))
		node := &contactNode{contact: make(chan struct{}, 1), unreachableNode: &unreachableNode{
			fakeNode: &fakeNode{cfg: conf(voter("n1"), nonvoter("n2")), index: 1}, ids: map[string]bool{"n2": true}}}
		r, err := voters.NewReconciler(voters.Config{Node: node, Membership: m, Voters: 3, Logger: testkit.Quiet()})
		if err != nil {
			t.Fatal(err)
		}
		stop := runReconciler(r)
		defer stop()
		synctest.Wait()
		if got := node.changes(); len(got) != 0 {
			t.Fatalf("changes %+v before the leader's raft reached n2; want none", got)
		}
		testkit.Advance(voters.UnreachableRecheck / 4)
		node.set("n2", false)
		node.contact <- struct{}{}
		reached := time.Now()
		synctest.Wait()
		if diff := cmp.Diff([]voters.Change{promote("n2")}, node.changes(), ignoreReason); diff != "" {
			t.Fatalf("changes once n2 answered (-want +got):\n%s", diff)
		}
		if d := time.Since(reached); d != 0 {
			t.Fatalf("the promotion came %s after the first answer; want at once", d)
		}
	})
}

// setConfig replaces the node's configuration, as a change raft applied that no pass planned.
func (f *fakeNode) setConfig(cfg raft.Configuration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfg, f.index = cfg, f.index+1
}

// forgetful is a membership whose mesh forgets peers, as the mesh forgets a member its
// retention after it died or left, and as the processes of a fleet started again never list a
// gateway that did not come back.
type forgetful struct {
	*voterstest.Membership
	mu   sync.Mutex
	gone map[string]bool
}

func newForgetful(peers ...voters.Peer) *forgetful {
	return &forgetful{Membership: voterstest.NewMembership(peers...), gone: make(map[string]bool)}
}

// Peers lists the peers set, but those forgotten.
func (f *forgetful) Peers() []voters.Peer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.DeleteFunc(f.Membership.Peers(), func(p voters.Peer) bool { return f.gone[p.ID] })
}

// forget makes the mesh forget id, or list it again, and signals.
func (f *forgetful) forget(id string, gone bool) {
	f.mu.Lock()
	f.gone[id] = gone
	f.mu.Unlock()
	f.Set()
}

// A server of the configuration that the mesh does not list is clocked from the pass that first
// found it missing: removed once it has been missing longer than the grace (--raft-voters 3,
// so that rule 7's floor does not keep it), with a clock that starts again when it is listed
// again, and when it left the configuration. It was left alone for good (rule 12), and a
// voter forgotten by the mesh kept its seat forever.
func TestReconcilerClocksServersTheMeshDoesNotList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		grace := voters.DefaultDeadVoterGrace
		m := newForgetful(alive("n1", "a"), alive("n2", "a"), alive("n3", "a"))
		node := &fakeNode{cfg: conf(voter("n1"), voter("n2"), voter("n3")), index: 1}
		r, err := voters.NewReconciler(voters.Config{Node: node, Membership: m, Voters: 3,
			ReconcileInterval: time.Second, Logger: testkit.Quiet()})
		if err != nil {
			t.Fatal(err)
		}
		stop := runReconciler(r)
		defer stop()
		synctest.Wait()
		changes := func(when string, want ...voters.Change) {
			t.Helper()
			if diff := cmp.Diff(want, node.changes(), ignoreReason, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("%s: changes (-want +got):\n%s", when, diff)
			}
		}

		// Missing, then listed again within the grace: its clock is cleared.
		m.forget("n3", true)
		synctest.Wait()
		testkit.Advance(grace)
		changes("missing exactly the grace")
		m.forget("n3", false)
		testkit.Advance(30 * time.Second)

		// Missing again: a new clock, which the grace runs out on.
		m.forget("n3", true)
		synctest.Wait()
		testkit.Advance(grace)
		changes("missing again for the grace, longer than it since it first went")
		testkit.Advance(time.Second)
		changes("missing again past the grace", remove("n3"))

		// Out of the configuration its clock is dropped: put back while still missing, it is
		// clocked anew.
		testkit.Advance(10 * time.Second)
		node.setConfig(conf(voter("n1"), voter("n2"), voter("n3")))
		m.Set()
		synctest.Wait()
		testkit.Advance(grace)
		changes("put back in the configuration for the grace", remove("n3"))
		testkit.Advance(time.Second)
		changes("put back past the grace", remove("n3"), remove("n3"))
	})
}

// A new term of leadership starts its clocks at its start: a leader does not know since when
// the previous one found a server missing.
func TestReconcilerClocksEachTermAnew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		grace := voters.DefaultDeadVoterGrace
		m := newForgetful(alive("n1", "a"), alive("n2", "a"), alive("n3", "a"))
		m.forget("n3", true)
		node := &fakeNode{cfg: conf(voter("n1"), voter("n2"), voter("n3")), index: 1}
		r, err := voters.NewReconciler(voters.Config{Node: node, Membership: m, Voters: 3,
			ReconcileInterval: time.Second, Logger: testkit.Quiet()})
		if err != nil {
			t.Fatal(err)
		}
		stop := runReconciler(r)
		synctest.Wait()
		testkit.Advance(grace - 10*time.Second)
		stop() // the leadership is lost, and won again
		stop = runReconciler(r)
		defer func() { stop() }()
		synctest.Wait()
		testkit.Advance(grace)
		if got := node.changes(); len(got) != 0 {
			t.Fatalf("changes %+v within the grace of the new term; want none", got)
		}
		testkit.Advance(time.Second)
		if diff := cmp.Diff([]voters.Change{remove("n3")}, node.changes(), ignoreReason); diff != "" {
			t.Fatalf("past the grace of the new term: changes (-want +got):\n%s", diff)
		}
	})
}
