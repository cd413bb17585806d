package cachesync

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// TestOwnerLoadsExpire checks the owner's sums: every fresh report counted, each reporter's
// share given apart so a subscriber's own can be taken out, and a report older than the
// expiry dropped.
func TestOwnerLoadsExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newOwnerLoads(time.Second)
		o.report("b", map[worker.ID]int64{"w1": 3, "w2": 1}, time.Now())
		time.Sleep(600 * time.Millisecond)
		o.report("c", map[worker.ID]int64{"w1": 2}, time.Now())
		total, by := o.sums(time.Now())
		if total["w1"] != 5 || total["w2"] != 1 || total["w1"]-by["b"]["w1"] != 2 {
			t.Errorf("sums %v by %v, want w1 5 (2 without b's), w2 1", total, by)
		}
		time.Sleep(600 * time.Millisecond) // b's report is 1.2 s old, c's 0.6 s
		total, _ = o.sums(time.Now())
		if total["w1"] != 2 || total["w2"] != 0 {
			t.Errorf("after b's report expired: %v, want w1 2 only", total)
		}
		o.forget("c")
		if total, _ = o.sums(time.Now()); len(total) != 0 {
			t.Errorf("after c is forgotten: %v, want nothing", total)
		}
	})
}

// TestSetLoadsSendsChangesAndRefreshes checks when a reporter's load goes out: when it changed,
// again every refresh while not zero, once as empty when it fell to zero, then not at all.
func TestSetLoadsSendsChangesAndRefreshes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b batch
		due := func() bool {
			m, _ := b.take("me")
			return m != nil && m.Loads != nil
		}
		const refresh = 500 * time.Millisecond
		tick := func(l map[worker.ID]int64) bool {
			time.Sleep(100 * time.Millisecond)
			b.setLoads(l, time.Now(), refresh)
			return due()
		}
		if !tick(map[worker.ID]int64{"w": 2}) {
			t.Fatal("a new load was not sent")
		}
		for i := range 3 {
			if tick(map[worker.ID]int64{"w": 2}) {
				t.Fatalf("an unchanged load was sent again after %d ticks", i+1)
			}
		}
		if !tick(map[worker.ID]int64{"w": 3}) {
			t.Fatal("a changed load was not sent")
		}
		sent := 0
		for range 5 {
			if tick(map[worker.ID]int64{"w": 3}) {
				sent++
			}
		}
		if sent != 1 {
			t.Errorf("an unchanged load was refreshed %d times in 500 ms, want once", sent)
		}
		if !tick(nil) {
			t.Fatal("a load fallen to zero was not sent")
		}
		for range 10 {
			if tick(nil) {
				t.Fatal("a zero load was sent again")
			}
		}
	})
}
