package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/leader"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// fakeMembership is a Membership whose peers a test sets; its signals never block.
type fakeMembership = testkit.Members[Peer]

func newMembership(peers ...Peer) *fakeMembership {
	return testkit.NewMembers(func(p Peer) string { return p.ID }, peers...)
}

// fsmStore is a Store over a real FSM, applying each command at the next index.
type fsmStore struct {
	mu      sync.Mutex
	f       *fsm.FSM
	index   uint64
	entries int   // Reassign entries applied
	fail    error // returned by the next Apply, once
}

func newStore(t *testing.T, owners ...string) *fsmStore {
	t.Helper()
	s := &fsmStore{f: fsm.New(slog.New(slog.DiscardHandler))}
	for i, o := range owners {
		spec := worker.Spec{URL: fmt.Sprintf("http://127.0.0.1:%d", 8000+i)}
		if err := spec.Normalize(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(context.Background(), fsm.Register{Spec: spec, Owner: o}); err != nil {
			t.Fatal(err)
		}
	}
	s.entries = 0
	return s
}

func (s *fsmStore) WorkersShared() []fsm.Record { return s.f.WorkersShared() }

func (s *fsmStore) Draining() []fsm.DrainingPeer { return s.f.Draining() }

func (s *fsmStore) Apply(_ context.Context, c fsm.Command) (fsm.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail; err != nil {
		s.fail = nil
		return fsm.Result{}, err
	}
	data, err := fsm.Encode(c)
	if err != nil {
		return fsm.Result{}, err
	}
	s.index++
	if c.Type() == fsm.TypeReassign {
		s.entries++
	}
	res := s.f.Apply(&raft.Log{Index: s.index, Data: data}).(fsm.Result)
	return res, res.Err
}

func (s *fsmStore) owners() map[string]int {
	out := make(map[string]int)
	for _, r := range s.f.Workers() {
		out[r.Owner]++
	}
	return out
}

func (s *fsmStore) reassigns() int { s.mu.Lock(); defer s.mu.Unlock(); return s.entries }

// logBuffer collects log lines safely (the shared test sink).
type logBuffer = logbuf.Buffer

// start runs d in the bubble as a leader's only duty until the returned stop is called.
func start(d leader.Duty) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); leader.Run(ctx, d) }()
	return func() { cancel(); <-done }
}

// TestFailoverAfterGrace: a dead owner's workers move once its grace ran out, in one entry,
// woken by the grace deadline rather than the periodic pass, with one log line and the metrics.
func TestFailoverAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		m := newMembership(peer("g1", "", mesh.StatusAlive, now), peer("g2", "", mesh.StatusAlive, now), peer("g3", "", mesh.StatusAlive, now))
		s := newStore(t, "g1", "g2", "g2", "g2", "g3")
		var logs logBuffer
		reg := prometheus.NewRegistry()
		r, err := NewFailoverReconciler(FailoverConfig{Store: s, Membership: m, Grace: 2 * time.Second, Registerer: reg,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(r)
		defer stop()
		synctest.Wait()
		if s.reassigns() != 0 {
			t.Fatalf("moved with every owner alive: %v", s.owners())
		}
		m.Set(peer("g2", "", mesh.StatusDead, time.Now()))
		testkit.Advance(2 * time.Second)
		if s.reassigns() != 0 || s.owners()["g2"] != 3 {
			t.Fatalf("moved at exactly the grace: %v", s.owners())
		}
		testkit.Advance(time.Millisecond)
		if got := s.owners(); got["g2"] != 0 || got["g1"]+got["g3"] != 5 || s.reassigns() != 1 {
			t.Fatalf("after the grace: owners %v, %d entries", got, s.reassigns())
		}
		for _, rec := range s.f.Workers() {
			if rec.Owner != "g2" && rec.Epoch <= 5 && rec.Revision > 5 {
				t.Errorf("%s moved without a new epoch: %+v", rec.ID, rec)
			}
		}
		if n := strings.Count(logs.String(), "failed over a gone owner's workers"); n != 1 ||
			!strings.Contains(logs.String(), "owner=g2 owner_status=dead workers=3") {
			t.Errorf("%d failover lines:\n%s", n, logs.String())
		}
		if got := testutil.ToFloat64(r.failovers); got != 1 {
			t.Errorf("failovers_total = %v", got)
		}
		if got := testutil.ToFloat64(r.moved); got != 3 {
			t.Errorf("failover_workers_total = %v", got)
		}
		// Idempotent: further passes move nothing.
		testkit.Advance(DefaultReconcileInterval)
		if s.reassigns() != 1 {
			t.Errorf("%d entries after a periodic pass; want 1", s.reassigns())
		}
	})
}

// TestFailoverMeshOfOne: a gateway alone owns all its workers and never writes.
func TestFailoverMeshOfOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMembership(peer("g1", "", mesh.StatusAlive, time.Now()))
		s := newStore(t, "g1", "g1", "g1")
		r, err := NewFailoverReconciler(FailoverConfig{Store: s, Membership: m, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(r)
		defer stop()
		testkit.Advance(10 * DefaultReconcileInterval)
		if s.reassigns() != 0 || r.passes.Load() < 10 {
			t.Fatalf("%d entries in %d passes", s.reassigns(), r.passes.Load())
		}
	})
}

// TestFailoverBatches: more moves than MaxMovesPerEntry take several entries in one wake.
func TestFailoverBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		m := newMembership(peer("g1", "", mesh.StatusAlive, now), peer("g2", "", mesh.StatusLeft, now.Add(-time.Hour)))
		s := newStore(t, "g2", "g2", "g2", "g2", "g2", "g2", "g2", "g2", "g2", "g2")
		r, err := NewFailoverReconciler(FailoverConfig{Store: s, Membership: m, MaxMovesPerEntry: 4, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(r)
		defer stop()
		synctest.Wait()
		if got := s.owners(); got["g1"] != 10 || s.reassigns() != 3 {
			t.Fatalf("owners %v in %d entries; want 10 on g1 in 3", got, s.reassigns())
		}
	})
}

// TestFailoverUnknownOwner: an owner the mesh does not list is timed from the first pass that
// missed it; one that shows up again keeps its workers.
func TestFailoverUnknownOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMembership(peer("g1", "", mesh.StatusAlive, time.Now()))
		s := newStore(t, "g1", "ghost", "late")
		r, err := NewFailoverReconciler(FailoverConfig{Store: s, Membership: m, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(r)
		defer stop()
		<-time.After(DefaultFailoverGrace / 2) // the bubble's fake clock
		m.Set(peer("late", "", mesh.StatusAlive, time.Now()))
		testkit.Advance(DefaultFailoverGrace)
		if got := s.owners(); got["ghost"] != 0 || got["late"]+got["g1"] != 3 || s.reassigns() != 1 {
			t.Fatalf("owners %v in %d entries; want ghost's worker on a live peer", got, s.reassigns())
		}
		for _, rec := range s.f.Workers() {
			if moved := rec.Epoch > 3; moved != (rec.Revision > 3) || (moved && rec.Owner == "ghost") {
				t.Errorf("record %+v", rec)
			}
		}
		moved := 0
		for _, rec := range s.f.Workers() {
			if rec.Epoch > 3 {
				moved++
			}
		}
		if moved != 1 {
			t.Errorf("%d records moved; want ghost's only", moved)
		}
	})
}

// TestFailoverApplyError: a failed entry is planned again at the next pass.
func TestFailoverApplyError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		m := newMembership(peer("g1", "", mesh.StatusAlive, now), peer("g2", "", mesh.StatusDead, now.Add(-time.Hour)))
		s := newStore(t, "g2", "g2")
		s.fail = errors.New("no leader")
		r, err := NewFailoverReconciler(FailoverConfig{Store: s, Membership: m, ReconcileInterval: 5 * time.Second,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(r)
		defer stop()
		synctest.Wait()
		if s.owners()["g2"] != 2 {
			t.Fatalf("moved despite the error: %v", s.owners())
		}
		testkit.Advance(5 * time.Second)
		if got := s.owners(); got["g1"] != 2 {
			t.Fatalf("after the next pass: %v", got)
		}
	})
}

func TestNewFailoverReconciler(t *testing.T) {
	if _, err := NewFailoverReconciler(FailoverConfig{Membership: newMembership()}); err == nil {
		t.Error("no error without a Store")
	}
	if _, err := NewFailoverReconciler(FailoverConfig{Store: newStore(t)}); err == nil {
		t.Error("no error without a Membership")
	}
	reg := prometheus.NewRegistry()
	cfg := FailoverConfig{Store: newStore(t), Membership: newMembership(), Registerer: reg}
	if _, err := NewFailoverReconciler(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewFailoverReconciler(cfg); err == nil {
		t.Error("registering the metrics twice did not fail")
	}
}

// TestFailoverReport: one line and one failover per gone owner, counting only the moves that
// applied, and a line when items were fenced off (a plan on a stale view).
func TestFailoverReport(t *testing.T) {
	var logs logBuffer
	reg := prometheus.NewRegistry()
	r, err := NewFailoverReconciler(FailoverConfig{Store: newStore(t), Membership: newMembership(), Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	moves := []Move{
		{ID: "w-a", From: "g2", Epoch: 1, To: "g1"},
		{ID: "w-b", From: "g2", Epoch: 2, To: "g3"},
		{ID: "w-c", From: "g4", Epoch: 3, To: "g1"},
		{ID: "w-d", From: "g5", Epoch: 4, To: "g1"}, // fenced off: g5 logs nothing
	}
	peers := []Peer{peer("g2", "", mesh.StatusDead, t0), peer("g4", "", mesh.StatusLeft, t0), peer("g5", "", mesh.StatusDead, t0)}
	res := &fsm.ReassignResult{
		Moved:   []worker.ID{"w-a", "w-b", "w-c"},
		Skipped: []fsm.ReassignSkip{{ID: "w-d", Reason: "fenced: owner \"g1\" at epoch 9, not \"g5\" at epoch 4"}},
	}
	if got := r.report(moves, peers, res); got != 3 {
		t.Errorf("report = %d moved, want 3", got)
	}
	out := logs.String()
	for _, want := range []string{
		"owner=g2 owner_status=dead workers=2 to=g1:1,g3:1",
		"owner=g4 owner_status=left workers=1 to=g1:1",
		"some failover moves were fenced off",
		"skipped=1 first=w-d",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the log:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "failed over a gone owner's workers"); n != 2 {
		t.Errorf("%d failover lines, want 2 (g2, g4):\n%s", n, out)
	}
	if got := testutil.ToFloat64(r.failovers); got != 2 {
		t.Errorf("failovers_total = %v, want 2", got)
	}
	if got := testutil.ToFloat64(r.moved); got != 3 {
		t.Errorf("failover_workers_total = %v, want 3", got)
	}
	if got := r.report(moves, peers, nil); got != 0 {
		t.Errorf("report of a rejected entry = %d, want 0", got)
	}
}
