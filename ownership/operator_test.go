package ownership

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/mesh"
)

func newOperator(t *testing.T, s *fsmStore, m Membership, maxMoves int) (*Operator, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterOwned(reg, s.WorkersShared); err != nil {
		t.Fatal(err)
	}
	return NewOperator(OperatorConfig{Records: s, Membership: m, Apply: s, Metrics: metrics, MaxMovesPerEntry: maxMoves,
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return t0 }}), reg
}

// startedAt is p whose process started at t.
func startedAt(p Peer, t time.Time) Peer { p.Started = t; return p }

func alivePeers(ids ...string) *fakeMembership {
	var ps []Peer
	for _, id := range ids {
		ps = append(ps, peer(id, "", mesh.StatusAlive, t0.Add(-time.Hour)))
	}
	return newMembership(ps...)
}

// TestOperatorTransfer: a transfer moves the worker in one fenced entry and counts it; a record
// read before another change is fenced off and moves nothing; a refused target writes nothing.
func TestOperatorTransfer(t *testing.T) {
	s := newStore(t, "g1", "g1")
	op, reg := newOperator(t, s, alivePeers("g1", "g2", "g3"), 0)
	recs := s.f.Workers()
	out, err := op.Transfer(context.Background(), recs[0], "g2")
	if err != nil || len(out.Moved) != 1 || out.Index != 3 {
		t.Fatalf("transfer: %+v, %v", out, err)
	}
	if r, _ := s.f.Worker(recs[0].ID); r.Owner != "g2" || r.Epoch != 3 {
		t.Errorf("record after: %+v", r)
	}
	// recs[0] is now stale: its fence (g1 at epoch 1) no longer holds.
	if _, err := op.Transfer(context.Background(), recs[0], "g3"); !errors.Is(err, ErrFenced) {
		t.Errorf("stale transfer: %v, want ErrFenced", err)
	}
	if _, err := op.Transfer(context.Background(), recs[1], "g9"); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("to an unknown peer: %v", err)
	}
	if out, err := op.Transfer(context.Background(), recs[1], "g1"); err != nil || len(out.Moves) != 0 || out.Index != 0 {
		t.Errorf("to its owner: %+v, %v", out, err)
	}
	if got := testutil.ToFloat64(op.cfg.Metrics.handoffs.WithLabelValues("transfer")); got != 1 {
		t.Errorf("handoffs_total{transfer} = %v", got)
	}
	if n, err := testutil.GatherAndCount(reg, "meshgw_ownership_workers_owned"); err != nil || n != 2 {
		t.Errorf("workers_owned series: %d, %v", n, err)
	}
}

// TestOperatorRebalance: a dry run writes nothing; a rebalance writes the fewest moves in
// entries of at most MaxMovesPerEntry.
func TestOperatorRebalance(t *testing.T) {
	s := newStore(t, "g1", "g1", "g1", "g1", "g1", "g1")
	op, _ := newOperator(t, s, alivePeers("g1", "g2", "g3"), 3)
	dry, err := op.Rebalance(context.Background(), true)
	if err != nil || len(dry.Moves) != 4 || dry.Index != 0 || s.reassigns() != 0 || s.index != 6 {
		t.Fatalf("dry run: %+v, %v (index %d)", dry, err, s.index)
	}
	out, err := op.Rebalance(context.Background(), false)
	if err != nil || len(out.Moved) != 4 || out.Index != 8 {
		t.Fatalf("rebalance: %+v, %v", out, err)
	}
	if got := s.owners(); got["g1"] != 2 || got["g2"] != 2 || got["g3"] != 2 {
		t.Errorf("owners after: %v", got)
	}
	if again, _ := op.Rebalance(context.Background(), false); len(again.Moves) != 0 || again.Index != 0 {
		t.Errorf("a second rebalance: %+v", again)
	}
	if got := testutil.ToFloat64(op.cfg.Metrics.handoffs.WithLabelValues("rebalance")); got != 4 {
		t.Errorf("handoffs_total{rebalance} = %v", got)
	}
}

// TestOperatorDrain: the marks and the moves go in one entry, each mark naming the process of
// its peer the mesh lists (none for a peer that publishes no start time); afterwards the drained
// peers are marked, own nothing but what cannot move, and a rebalance gives them nothing.
func TestOperatorDrain(t *testing.T) {
	s := newStore(t, "blue1", "blue1", "blue2", "green1")
	m := alivePeers("blue2", "green1", "green2")
	started := t0.Add(-2 * time.Hour)
	m.Set(startedAt(peer("blue1", "", mesh.StatusAlive, t0.Add(-time.Hour)), started))
	op, _ := newOperator(t, s, m, 0)
	out, err := op.Drain(context.Background(), []string{"blue1", "blue2"})
	if err != nil || len(out.Moved) != 3 || len(out.Stuck) != 0 || out.Index != 5 {
		t.Fatalf("drain: %+v, %v", out, err)
	}
	if got := s.owners(); got["blue1"]+got["blue2"] != 0 {
		t.Errorf("owners after: %v", got)
	}
	if marks := s.f.Draining(); len(marks) != 2 || !marks[0].Since.Equal(t0) || !marks[0].Started.Equal(started) || !marks[1].Started.IsZero() {
		t.Errorf("marks: %+v", marks)
	}
	if r, _ := op.Rebalance(context.Background(), true); len(r.Moves) > 1 {
		t.Errorf("rebalance after the drain: %+v", r.Moves)
	}
	for _, m := range mustRebalance(t, op).Moves {
		if m.To == "blue1" || m.To == "blue2" {
			t.Errorf("rebalance gave %s to a draining peer", m.ID)
		}
	}
	if got := testutil.ToFloat64(op.cfg.Metrics.handoffs.WithLabelValues("drain")); got != 3 {
		t.Errorf("handoffs_total{drain} = %v", got)
	}
}

func mustRebalance(t *testing.T, op *Operator) Outcome {
	t.Helper()
	out, err := op.Rebalance(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFailoverSkipsDrainingPeers: a gone owner's workers never go to a peer marked draining.
func TestFailoverSkipsDrainingPeers(t *testing.T) {
	s := newStore(t, "g2", "g2", "g2", "g2")
	if _, err := s.Apply(context.Background(), fsm.OperatorReassign{Drain: []string{"g3"}}); err != nil {
		t.Fatal(err)
	}
	m := newMembership(peer("g1", "", mesh.StatusAlive, t0), peer("g2", "", mesh.StatusLeft, time.Now().Add(-time.Hour)),
		peer("g3", "", mesh.StatusAlive, t0))
	r, err := NewFailoverReconciler(FailoverConfig{Store: s, Membership: m, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if moved, _, _, err := r.pass(context.Background(), map[string]time.Time{}); err != nil || moved != 4 {
		t.Fatalf("pass: %d moved, %v", moved, err)
	}
	if got := s.owners(); got["g1"] != 4 {
		t.Errorf("owners: %v; want every worker on g1", got)
	}
}

// TestFailoverHandsOffDrainingOwners: the leader's pass moves the workers a draining peer still
// owns (registered after its drain), as drain.
func TestFailoverHandsOffDrainingOwners(t *testing.T) {
	s := newStore(t, "blue", "blue", "green")
	if _, err := s.Apply(context.Background(), fsm.OperatorReassign{Drain: []string{"blue"}}); err != nil {
		t.Fatal(err)
	}
	m := newMembership(peer("blue", "", mesh.StatusAlive, t0), peer("green", "", mesh.StatusAlive, t0))
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewFailoverReconciler(FailoverConfig{Store: s, Membership: m, Metrics: metrics, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if moved, _, _, err := r.pass(context.Background(), map[string]time.Time{}); err != nil || moved != 2 {
		t.Fatalf("pass: %d moved, %v", moved, err)
	}
	if got := s.owners(); got["green"] != 3 {
		t.Errorf("owners: %v", got)
	}
	if got := testutil.ToFloat64(metrics.handoffs.WithLabelValues("drain")); got != 2 {
		t.Errorf("handoffs_total{drain} = %v", got)
	}
}
