package fleet

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// memImports is an ImportStore in memory that can be told to fail.
type memImports struct {
	mu   sync.Mutex
	m    map[string][]byte
	fail bool
}

func (s *memImports) SaveImports(put map[string][]byte, del []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("disk full")
	}
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	for k, v := range put {
		s.m[k] = v
	}
	for _, k := range del {
		delete(s.m, k)
	}
	return nil
}

func (s *memImports) LoadImports(each func(string, []byte) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.m {
		if err := each(k, v); err != nil {
			return err
		}
	}
	return nil
}

func (s *memImports) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// save runs one save of f's importer into store, as KeepImports does.
func saveOnce(t *testing.T, f *importFixture, store *memImports) {
	t.Helper()
	stop := KeepImports(f.im, store, time.Hour, testkit.Quiet())
	stop() // the final save
}

// TestImportsSurviveARestart: the state imported before a restart is saved, and a new importer
// restores it once the records are in the pool, each entry as old as it is (so it goes stale on
// time), routable by its last state; entries whose record is gone, that this gateway owns now,
// or of another epoch are dropped; a newer bulletin still wins over a restored one.
func TestImportsSurviveARestart(t *testing.T) {
	f := newImportFixture(t)
	ready := f.put(spec(t, 8001), "a", 5)
	notReady := f.put(spec(t, 8002), "a", 5)
	gone := f.put(spec(t, 8003), "a", 5)
	mine := f.put(spec(t, 8004), "a", 5)
	moved := f.put(spec(t, 8005), "a", 5)
	for i, id := range []string{string(ready), string(notReady), string(gone), string(mine), string(moved)} {
		h := health.Ready
		if id == string(notReady) {
			h = health.NotReady
		}
		f.im.Bulletins([]mesh.Bulletin{{Worker: id, Owner: "a", Epoch: 5, Seq: uint64(10 + i), Health: h,
			Breaker: breaker.Closed, ProbeInterval: time.Second}})
	}
	receivedAt := f.clk.Now()
	store := &memImports{}
	saveOnce(t, f, store)
	if store.len() != 5 {
		t.Fatalf("%d entries saved, want 5", store.len())
	}

	// The restart: the same records, except one removed, one owned here and one moved on.
	f.clk.Advance(time.Minute)
	g := newImportFixture(t)
	g.clk = f.clk
	g.im.cfg.Now = f.clk.Now
	g.put(spec(t, 8001), "a", 5)
	g.put(spec(t, 8002), "a", 5)
	g.put(spec(t, 8004), "me", 6)
	g.put(spec(t, 8005), "b", 7)
	if g.routable(ready) {
		t.Fatal("routable before the restore")
	}
	n, err := g.im.Restore(store)
	if err != nil || n != 2 {
		t.Fatalf("Restore = %d, %v; want 2 entries applied", n, err)
	}
	if !g.routable(ready) || g.routable(notReady) {
		t.Errorf("after the restore: ready routable %v (want true), not_ready routable %v (want false)",
			g.routable(ready), g.routable(notReady))
	}
	st, ok := g.im.Imported(ready)
	if !ok || !st.Received.Equal(receivedAt) || !st.Stale {
		t.Errorf("restored state: %+v (ok %v); want received at %v, stale", st, ok, receivedAt)
	}
	for _, id := range []worker.ID{gone, mine, moved} {
		if _, ok := g.im.Imported(id); ok {
			t.Errorf("%s was restored although its record is gone, owned here or at another epoch", id)
		}
	}
	g.im.Bulletins([]mesh.Bulletin{{Worker: string(notReady), Owner: "a", Epoch: 5, Seq: 99, Health: health.Ready,
		Breaker: breaker.Closed, ProbeInterval: time.Second}})
	if !g.routable(notReady) {
		t.Error("a live bulletin newer than the restored one did not apply")
	}

	// The gone entry is deleted at the next save; the live change is saved.
	saveOnce(t, g, store)
	for _, id := range []worker.ID{gone, mine, moved} {
		if _, ok := store.m[string(id)]; ok {
			t.Errorf("the entry of %s (removed, owned here or moved) is still saved", id)
		}
	}
}

// TestImportSaveRetries: a save that fails leaves its entries to the next one; a forgotten
// worker's entry is deleted.
func TestImportSaveRetries(t *testing.T) {
	f := newImportFixture(t)
	id := f.put(spec(t, 8001), "a", 5)
	f.im.Bulletins([]mesh.Bulletin{{Worker: string(id), Owner: "a", Epoch: 5, Seq: 1, Health: health.Ready, Breaker: breaker.Closed}})
	store := &memImports{fail: true}
	saveOnce(t, f, store)
	store.fail = false
	saveOnce(t, f, store)
	if store.len() != 1 {
		t.Fatalf("%d entries after a failed save and a good one, want 1", store.len())
	}
	f.im.Forget(id)
	saveOnce(t, f, store)
	if store.len() != 0 {
		t.Errorf("%d entries after Forget, want 0", store.len())
	}
}
