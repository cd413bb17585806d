package fleet

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// probeCounter is a prober whose every probe passes, counting them per worker as an engine
// counts one gateway's probes.
type probeCounter struct {
	mu sync.Mutex
	n  map[worker.ID]int
}

func (p *probeCounter) Probe(_ context.Context, t health.Target) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[worker.ID]int{}
	}
	p.n[t.ID]++
	return nil
}

func (p *probeCounter) count(id worker.ID) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[id]
}

// probingGateway is one gateway's reconciler and health manager over its own applied records,
// with its probes counted.
type probingGateway struct {
	recs   *fakeRecords
	r      *Reconciler
	probes *probeCounter
	logs   *logBuffer
}

// startProbingGateway starts gateway nodeID on recs, checking its workers every interval;
// caughtUp is its Config.CaughtUp. Call it inside the synctest bubble.
func startProbingGateway(t *testing.T, nodeID string, recs *fakeRecords, caughtUp <-chan struct{}, interval int) *probingGateway {
	t.Helper()
	g := &probingGateway{recs: recs, probes: &probeCounter{}, logs: &logBuffer{}}
	log := g.logs.Logger(slog.LevelInfo)
	p := pool.New(pool.Config{StartPending: true})
	hc := health.DefaultConfig()
	hc.CheckIntervalSecs = interval
	m, err := owned.New(owned.Options{Pool: p, NodeID: nodeID, Health: hc, Breaker: breaker.DefaultConfig(), Logger: log,
		Probers: map[string]health.Prober{worker.ModeHTTP: g.probes}})
	if err != nil {
		t.Fatal(err)
	}
	g.r = New(Config{NodeID: nodeID, Records: recs, Pool: p, Owner: m, CaughtUp: caughtUp, Logger: log})
	g.r.Start()
	t.Cleanup(func() { g.r.Stop(); m.Close() })
	return g
}

// TestOwnerChangeMovesProbesAtOnce: once a gateway has applied a record that
// names another owner, it starts no further probe of the worker, and the new owner probes it at
// once (DESIGN.md section 5: fencing, failover). Disabled workers are probed like any other (an
// operator's disable stops traffic, not health checks), and a worker this gateway restored from
// its saved state at a restart moves as well while raft is still catching up: the pool keeps
// the restored state until then (fail-static), but the probes stop.
func TestOwnerChangeMovesProbesAtOnce(t *testing.T) {
	const interval = time.Second
	tests := []struct {
		name     string
		disabled bool
		// restored: the former owner restarted on its saved state and has not caught up with
		// raft (CaughtUp open) when the failover applies.
		restored bool
	}{
		{name: "enabled worker"},
		{name: "disabled worker", disabled: true},
		{name: "worker restored at start, before raft caught up", restored: true},
		{name: "disabled worker restored at start, before raft caught up", disabled: true, restored: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Each gateway applies the same raft log to its own state.
				oldRecs, newRecs := newFakeRecords(), newFakeRecords()
				both := func(change func(*fakeRecords)) {
					for _, f := range []*fakeRecords{oldRecs, newRecs} {
						change(f)
						f.signal()
					}
				}
				s := spec(t, 8001, func(s *worker.Spec) { s.Model = "m" }) // declared: no model discovery
				id := s.ID()
				both(func(f *fakeRecords) {
					f.put(fsm.Record{ID: id, Spec: s, Owner: "n1", Epoch: 176, Disabled: tt.disabled})
				})
				var caughtUp chan struct{}
				if tt.restored {
					caughtUp = make(chan struct{}) // n1 restarted: its saved state names it the owner
				}
				former := startProbingGateway(t, "n1", oldRecs, caughtUp, int(interval/time.Second))
				next := startProbingGateway(t, "n2", newRecs, nil, int(interval/time.Second))
				synctest.Wait()
				if got := former.probes.count(id); got != 1 {
					t.Fatalf("the owner probed its worker %d times at start, want 1 (at once)", got)
				}
				testkit.Advance(2 * interval)
				if got, want := former.probes.count(id), 3; got != want {
					t.Fatalf("the owner probed %d times in its first two intervals, want %d", got, want)
				}

				// The leader fails the worker over to n2; both gateways apply it (n1 still
				// catching up when restored).
				both(func(f *fakeRecords) {
					f.update(id, func(r *fsm.Record) { r.Owner, r.Epoch = "n2", 177 })
				})
				synctest.Wait()
				stopped := former.probes.count(id)
				if got := next.probes.count(id); got != 1 {
					t.Errorf("the new owner probed %d times when it applied the failover, want 1 (at once)", got)
				}
				testkit.Advance(5 * interval)
				if got := former.probes.count(id); got != stopped {
					t.Errorf("the former owner probed %d more times after it applied the failover, want none", got-stopped)
				}
				if got := next.probes.count(id); got != 6 {
					t.Errorf("the new owner probed %d times in 5 intervals after the failover, want 6", got)
				}

				if !tt.restored {
					return
				}
				// Caught up: the held state reaches the pool, and nothing probes again.
				held := former.probes.count(id)
				close(caughtUp)
				testkit.Advance(3 * interval)
				if got := former.probes.count(id); got != held {
					t.Errorf("the former owner probed %d more times once caught up", got-held)
				}
				if w := former.r.cfg.Pool.Get(id); w == nil || w.Owner() != "n2" || w.Origin != pool.OriginMesh {
					t.Errorf("once caught up, the former owner's pool holds %v, want the worker owned by n2", w)
				}
				if !strings.Contains(former.logs.String(), "worker owner changed") {
					t.Errorf("no owner change logged once caught up:\n%s", former.logs.String())
				}
			})
		})
	}
}
