package owned

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// cycle takes a ready worker out of routing (F=3 failed probes) and back (S=2 passes): one
// promotion.
func (f *fixture) cycle(id worker.ID) {
	f.t.Helper()
	f.probe.set(id, errDown)
	for range 3 {
		testkit.Advance(10 * time.Second)
	}
	f.wantHealth(id, health.NotReady)
	f.probe.set(id, nil)
	for range 2 {
		testkit.Advance(10 * time.Second)
	}
	f.wantHealth(id, health.Ready)
}

func (f *fixture) wantDiscovered(id worker.ID, want []string) {
	f.t.Helper()
	if got := f.pool.Get(id).DiscoveredModels(); !slices.Equal(got, want) {
		f.t.Fatalf("discovered models of %s = %q, want %q", id, got, want)
	}
}

// A worker that declares no model is asked which it serves when registration reaches it, once
// for HTTP and gRPC; a ZMQ worker's WELCOME is read again at every promotion.
func TestDiscoveryWhenReached(t *testing.T) {
	tests := []struct {
		name string
		url  string
		// asks after the promotion that follows a not_ready spell
		asksAfterCycle int
	}{
		{"http", "http://127.0.0.1:9001", 1},
		{"grpc", "grpc://127.0.0.1:9002", 1},
		{"zmq", "tcp://127.0.0.1:9003", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t)
				spec := worker.Spec{URL: tt.url}
				id := idOf(t, spec)
				f.probe.setModels(id, listing{models: []string{"b", " a ", "b", ""}})
				f.own(spec, 1) // probed at once; the ask follows the promotion it brings
				synctest.Wait()
				f.wantHealth(id, health.Ready)
				f.wantDiscovered(id, []string{"a", "b"})
				testkit.Advance(30 * time.Second) // passing probes on a ready worker are no promotion
				if n := f.probe.listed(id); n != 1 {
					t.Fatalf("asked %d times, want once", n)
				}
				f.probe.setModels(id, listing{models: []string{"c"}})
				f.cycle(id)
				if n := f.probe.listed(id); n != tt.asksAfterCycle {
					t.Fatalf("asked %d times after a promotion, want %d", n, tt.asksAfterCycle)
				}
				want := []string{"a", "b"}
				if tt.asksAfterCycle > 1 {
					want = []string{"c"}
				}
				f.wantDiscovered(id, want)
				if w := f.pool.Get(id); !w.ServesModel([]byte("not-listed")) {
					t.Error("discovery narrowed routing: a worker that declares none must take any model")
				}
			})
		})
	}
}

// Declared models are never overwritten, and the worker is not asked; external providers are
// never asked, even with a lister given for them; a PATCH that drops a ready worker's declared
// models has it asked at once.
func TestDiscoveryLeavesDeclaredAndExternal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		declared := worker.Spec{URL: "http://127.0.0.1:9001", Model: "declared"}
		ext := worker.Spec{URL: "https://api.example.test/v1", ConnectionMode: worker.ModeExternal,
			Provider: "openai", Health: &worker.Health{DisableHealthCheck: ptr(false)}}
		for _, s := range []worker.Spec{declared, ext} {
			f.probe.setModels(idOf(t, s), listing{models: []string{"engine-says"}})
		}
		id, extID := f.own(declared, 1), f.own(ext, 1)
		testkit.Advance(30 * time.Second)
		f.wantHealth(id, health.Ready)
		f.wantHealth(extID, health.Ready)
		for _, w := range []worker.ID{id, extID} {
			if n := f.probe.listed(w); n != 0 {
				t.Errorf("%s asked %d times, want never", w, n)
			}
			f.wantDiscovered(w, nil)
		}
		if got := f.pool.Get(id).ListedModels(); !slices.Equal(got, []string{"declared"}) {
			t.Errorf("listed models %q, want the declared one", got)
		}
		patched := worker.Spec{URL: declared.URL}
		if _, _, err := f.pool.Upsert(patched, pool.OriginLocal); err != nil {
			t.Fatal(err)
		}
		f.m.Own(patched, 1, false)
		synctest.Wait()
		f.wantDiscovered(id, []string{"engine-says"})
	})
}

// A failed or hanging discovery never holds readiness: the worker is ready at its first passing
// probe, the failure is logged at DEBUG, and the next promotion asks again.
func TestFailedDiscoveryDoesNotBlockReadiness(t *testing.T) {
	tests := []struct {
		name  string
		first listing
		// wait is how long the failure takes to show (a hang lasts the 5 s health timeout).
		wait time.Duration
	}{
		{"error", listing{err: errors.New("GET /v1/models answered 404")}, 0},
		{"hang", listing{hang: true}, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t)
				spec := httpSpec(9001)
				spec.APIKey = "sk-discovery-secret"
				id := idOf(t, spec)
				f.probe.setModels(id, tt.first)
				start := time.Now()
				f.own(spec, 1)
				synctest.Wait()
				f.wantHealth(id, health.Ready)
				if time.Since(start) != 0 {
					t.Fatalf("readiness took %v of fake time", time.Since(start))
				}
				f.wantDiscovered(id, nil)
				testkit.Advance(tt.wait)
				if len(f.logs.Lines("level=DEBUG", "model discovery failed", string(id))) != 1 {
					t.Fatalf("want one DEBUG line for the failed discovery:\n%s", f.logs.String())
				}
				f.probe.setModels(id, listing{models: []string{"m"}})
				testkit.Advance(30 * time.Second)
				if n := f.probe.listed(id); n != 1 {
					t.Fatalf("asked %d times without a promotion, want 1", n)
				}
				f.cycle(id)
				f.wantDiscovered(id, []string{"m"})
				if n := f.probe.listed(id); n != 2 {
					t.Errorf("asked %d times, want 2", n)
				}
			})
		})
	}
}

// With health checks disabled an engine counts ready unprobed: it is asked then, once.
func TestDiscoveryWithChecksDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, withHealth(func(c *health.Config) { c.DisableHealthCheck = true }))
		spec := httpSpec(9001)
		id := idOf(t, spec)
		f.probe.setModels(id, listing{models: []string{"m"}})
		f.own(spec, 1)
		synctest.Wait()
		f.wantHealth(id, health.Ready)
		f.wantDiscovered(id, []string{"m"})
		testkit.Advance(time.Minute)
		if n, p := f.probe.listed(id), f.probe.count(id); n != 1 || p != 0 {
			t.Errorf("asked %d times and probed %d times, want 1 and 0", n, p)
		}
	})
}

// A quarantined worker is not asked; Disown during a discovery keeps its answer out of the pool.
func TestDiscoveryQuarantineAndDisown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		spec := httpSpec(9001)
		id := idOf(t, spec)
		release := make(chan struct{})
		f.probe.setModels(id, listing{models: []string{"m"}, release: release})
		f.own(spec, 1)
		synctest.Wait()
		f.m.Disown(id)
		close(release) // the engine answers after the worker was disowned
		synctest.Wait()
		f.wantDiscovered(id, nil)
		if _, _, err := f.pool.Upsert(spec, pool.OriginLocal); err != nil {
			t.Fatal(err)
		}
		f.m.Own(spec, 2, true)
		testkit.Advance(time.Minute)
		if n := f.probe.listed(id); n != 1 {
			t.Errorf("asked %d times, want only the first (disowned) discovery", n)
		}
	})
}
