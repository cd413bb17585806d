package ownership

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/testkit"
)

// TestAutoRebalance: nothing moves until membership has been quiet for the settle time; then
// ownership is evened out; a peer that joins takes part once it settled, and a join resets the
// wait.
func TestAutoRebalance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settle := 10 * time.Second
		m := newMembership(peer("g1", "", mesh.StatusAlive, time.Now()), peer("g2", "", mesh.StatusAlive, time.Now()))
		s := newStore(t, "g1", "g1", "g1", "g1", "g1", "g1")
		a, err := NewAutoRebalancer(AutoRebalanceConfig{Store: s, Membership: m, Settle: settle, ReconcileInterval: time.Minute,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer start(a)()
		testkit.Advance(settle - time.Millisecond)
		if got := s.owners(); got["g1"] != 6 {
			t.Fatalf("moved before membership settled: %v", got)
		}
		testkit.Advance(time.Millisecond)
		if got := s.owners(); got["g1"] != 3 || got["g2"] != 3 {
			t.Fatalf("after the settle: %v", got)
		}
		// g3 joins: the wait starts again, and g3 takes part once it has been alive for the settle.
		m.Set(peer("g3", "", mesh.StatusAlive, time.Now()))
		testkit.Advance(settle - time.Millisecond)
		if got := s.owners(); got["g3"] != 0 {
			t.Fatalf("g3 given workers before it settled: %v", got)
		}
		testkit.Advance(time.Millisecond)
		if got := s.owners(); got["g1"] != 2 || got["g2"] != 2 || got["g3"] != 2 {
			t.Fatalf("after g3 settled: %v", got)
		}
		index := s.index
		testkit.Advance(3 * time.Minute) // periodic passes while balanced write nothing
		if s.index != index {
			t.Errorf("balanced, yet %d entries were written", s.index-index)
		}
	})
}
