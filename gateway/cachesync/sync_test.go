package cachesync

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/testkit"
)

// TestIndexReachesEveryGateway routes a text through a gateway that does not own the worker
// and checks the owner and a third gateway learn it; a gateway started later learns it from
// the owner's first messages; after the owner is gone and another takes the worker, what is
// routed through any gateway still reaches every gateway.
func TestIndexReachesEveryGateway(t *testing.T) {
	f := newFleet(t, 2)
	f.own(0, "a")
	a, b, c := f.start("a"), f.start("b"), f.start("c")
	text := "System: be brief. " + strings.Repeat("The quick brown fox. ", 30)
	testkit.Within(t, 5*time.Second, "b subscribed to a", func() bool {
		a.sync.pub.mu.Lock()
		defer a.sync.pub.mu.Unlock()
		return len(a.sync.pub.subs) == 2
	})
	f.route(b, 0, text, time.Now())
	for _, n := range []*node{a, c} {
		testkit.Within(t, 5*time.Second, n.id+" knows the text b routed", func() bool { return f.knows(n, 0, text) })
	}
	if got := b.sync.Stats().ReportBlocks.Load(); got == 0 {
		t.Errorf("b reported no blocks")
	}

	d := f.start("d")
	testkit.Within(t, 5*time.Second, "a gateway started later knows it", func() bool { return f.knows(d, 0, text) })

	f.stop("a")
	f.own(0, "c")
	turn2 := text + " User: and then? " + strings.Repeat("More words. ", 10)
	f.route(b, 0, turn2, time.Now())
	for _, n := range []*node{c, d} {
		if err := testkit.Until(context.Background(), 5*time.Second, "", func() bool { return f.knows(n, 0, turn2) }); err != nil {
			t.Fatalf("%s does not know the next turn after failover (b reported %d blocks, dropped %d; %s dropped %d, applied %d; knows turn 1: %v)",
				n.id, b.sync.Stats().ReportBlocks.Load(), b.sync.Stats().Dropped.Load(), n.id, n.sync.Stats().Dropped.Load(),
				n.sync.Stats().AppliedBlocks.Load(), f.knows(n, 0, text))
		}
	}
}

// TestEvictionReachesEveryGateway checks that the owner's evictions are published.
func TestEvictionReachesEveryGateway(t *testing.T) {
	f := newFleet(t, 1)
	f.maxChars = 256
	f.own(0, "a")
	a, b := f.start("a"), f.start("b")
	testkit.Within(t, 5*time.Second, "b subscribed to a", func() bool {
		a.sync.pub.mu.Lock()
		defer a.sync.pub.mu.Unlock()
		return len(a.sync.pub.subs) == 1
	})
	old := strings.Repeat("old text. ", 20)
	f.route(a, 0, old, time.Now().Add(-time.Hour))
	testkit.Within(t, 5*time.Second, "b knows the old text", func() bool { return f.knows(b, 0, old) })
	young := strings.Repeat("young text. ", 20)
	f.route(a, 0, young, time.Now())
	testkit.Within(t, 5*time.Second, "b knows the young text", func() bool { return f.knows(b, 0, young) })
	a.idx.Evict(time.Now()) // the bound fits the young text, not both
	testkit.Within(t, 5*time.Second, "b forgot the old text", func() bool { return !f.knows(b, 0, old) })
	if !f.knows(b, 0, young) {
		t.Errorf("b forgot the young text too")
	}
}

// TestLoadIsFleetWide checks each gateway's Load of a worker: the requests in flight to it
// through every gateway, its own counted at once and not twice.
func TestLoadIsFleetWide(t *testing.T) {
	f := newFleet(t, 1)
	f.own(0, "a")
	a, b, c := f.start("a"), f.start("b"), f.start("c")
	wa, wb, wc := f.worker("a", 0), f.worker("b", 0), f.worker("c", 0)
	for range 3 {
		wb.Acquire()
	}
	wa.Acquire()
	if got := b.sync.Load(wb); got < 3 {
		t.Errorf("b's own requests are not counted at once: Load %d", got)
	}
	testkit.Within(t, 5*time.Second, "c sees 4", func() bool { return c.sync.Load(wc) == 4 })
	testkit.Within(t, 5*time.Second, "a sees 4", func() bool { return a.sync.Load(wa) == 4 })
	testkit.Within(t, 5*time.Second, "b sees 4, its own once", func() bool { return b.sync.Load(wb) == 4 })
	for range 3 {
		wb.Release()
	}
	testkit.Within(t, 5*time.Second, "c sees 1", func() bool { return c.sync.Load(wc) == 1 })
	f.stop("b")
	wa.Release()
	testkit.Within(t, 5*time.Second, "c sees 0", func() bool { return c.sync.Load(wc) == 0 })
}

// A worker's load must be as fresh as its entry: reported every 100 ms while the index went out
// every 20, the loads cache_aware weighed at 5 gateways were stale enough to move follow-up
// turns off the worker holding their history (docs/performance.md, "Fresher loads").
func TestLoadsAreReportedAsOftenAsTheIndex(t *testing.T) {
	for _, flush := range []time.Duration{0, 50 * time.Millisecond} {
		c := Config{FlushInterval: flush}
		c.setDefaults()
		if c.LoadInterval != c.FlushInterval {
			t.Errorf("flush interval %v: loads are reported every %v, the index every %v", flush, c.LoadInterval, c.FlushInterval)
		}
	}
	c := Config{LoadInterval: time.Second}
	c.setDefaults()
	if c.LoadInterval != time.Second {
		t.Errorf("a given load interval became %v", c.LoadInterval)
	}
}
