package owned

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// changes records OnChange and OnForget calls.
type changes struct {
	mu     sync.Mutex
	n      map[worker.ID]int
	forget []worker.ID
}

func (c *changes) opt() fixtureOpt {
	return func(o *Options) {
		o.OnChange = func(id worker.ID) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.n[id]++
		}
		o.OnForget = func(id worker.ID) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.forget = append(c.forget, id)
		}
	}
}

// take returns and resets the number of OnChange calls for id.
func (c *changes) take(id worker.ID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n[id]
	c.n[id] = 0
	return n
}

// Every change a bulletin carries is told, and steady successes on a closed circuit are not:
// an owner of a busy healthy worker publishes nothing per request.
func TestOnChangeTellsWhatBulletinsCarry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &changes{n: map[worker.ID]int{}}
		f := newFixture(t, c.opt())
		id := f.own(httpSpec(9300), 1)
		synctest.Wait()
		if n := c.take(id); n < 2 {
			t.Fatalf("Own and the promotion to ready told %d changes, want at least 2", n)
		}
		w := f.pool.Get(id)
		for range 100 {
			f.m.OnOutcome(w, 200, false)
		}
		if n := c.take(id); n != 0 {
			t.Fatalf("100 successes on a closed circuit told %d changes, want 0", n)
		}
		f.m.OnOutcome(w, 500, false)
		f.m.OnOutcome(w, 500, false)
		if n := c.take(id); n != 2 {
			t.Fatalf("two failures told %d changes, want 2 (failures 1, then 2)", n)
		}
		f.m.OnOutcome(w, 200, false) // the failures reset: a change
		f.m.OnOutcome(w, 200, false) // nothing more
		if n := c.take(id); n != 1 {
			t.Fatalf("the reset told %d changes, want 1", n)
		}
		f.probe.set(id, errDown) // a first failing probe changes the last error
		testkit.Advance(10 * time.Second)
		if n := c.take(id); n != 1 {
			t.Fatalf("a first failing probe told %d changes, want 1", n)
		}
		f.m.Disown(id)
		if diff := cmp.Diff([]worker.ID{id}, c.forget); diff != "" {
			t.Errorf("OnForget (-want +got):\n%s", diff)
		}
	})
}

// A worker that this gateway starts to own after a failover starts from the previous owner's
// last bulletin: ready and routable at once, its open breaker kept for the time left, and it is
// probed at once.
func TestSeedFromPreviousOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seed := Seed{Health: health.Ready, Breaker: breaker.Open, BreakerFailures: 3, BreakerReopenIn: 20 * time.Second}
		f := newFixture(t, func(o *Options) {
			o.Seed = func(worker.ID) (Seed, bool) { return seed, true }
		})
		spec := httpSpec(9301)
		f.probe.set(idOf(t, spec), errDown) // the first probe fails: below F, still ready
		id := f.own(spec, 9)
		synctest.Wait()
		if got := f.probe.count(id); got != 1 {
			t.Fatalf("probes at takeover = %d, want 1 (at once)", got)
		}
		f.wantHealth(id, health.Ready)
		st, _ := f.m.Status(id)
		if st.Breaker.State != breaker.Open || st.Breaker.ConsecutiveFailures != 3 {
			t.Fatalf("breaker = %+v, want open with 3 failures", st.Breaker)
		}
		if f.pool.Get(id).Allow() {
			t.Fatal("the seeded open breaker allows traffic")
		}
		testkit.Advance(20 * time.Second)
		if !f.pool.Get(id).Allow() {
			t.Fatal("the seeded breaker did not reopen when the time left had passed")
		}
	})
}
