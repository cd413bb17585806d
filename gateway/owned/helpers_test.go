package owned

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.Housekeeping()...) }

func ptr[T any](v T) *T { return &v }

var errDown = &health.ProbeError{StatusCode: 503, Reason: "status 503"}

// script is a fake prober and model lister: each worker answers its current result, set by the
// test.
type script struct {
	mu      sync.Mutex
	results map[worker.ID]error
	probes  map[worker.ID]int
	models  map[worker.ID]listing
	lists   map[worker.ID]int
}

// listing is what a worker answers when asked for its models; hang holds the answer until the
// caller gives up, release (when set) until it is closed.
type listing struct {
	models  []string
	err     error
	hang    bool
	release chan struct{}
}

func newScript() *script {
	return &script{results: map[worker.ID]error{}, probes: map[worker.ID]int{},
		models: map[worker.ID]listing{}, lists: map[worker.ID]int{}}
}

func (s *script) setModels(id worker.ID, l listing) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models[id] = l
}

// listed returns how many times id was asked for its models.
func (s *script) listed(id worker.ID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists[id]
}

func (s *script) ListModels(ctx context.Context, t health.Target) ([]string, error) {
	s.mu.Lock()
	s.lists[t.ID]++
	l := s.models[t.ID]
	s.mu.Unlock()
	if l.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if l.release != nil {
		select {
		case <-l.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return l.models, l.err
}

func (s *script) set(id worker.ID, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results[id] = err
}

func (s *script) count(id worker.ID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.probes[id]
}

func (s *script) Probe(_ context.Context, t health.Target) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probes[t.ID]++
	return s.results[t.ID]
}

// fixture is a Manager over a real pool, with scripted probers for every mode.
type fixture struct {
	t       *testing.T
	pool    *pool.Pool
	m       *Manager
	reg     *prometheus.Registry
	probe   *script
	logs    *syncBuffer
	mu      sync.Mutex
	removed []string // "id epoch reason", as OnRemove got them
}

type fixtureOpt func(*Options)

func withHealth(f func(*health.Config)) fixtureOpt { return func(o *Options) { f(&o.Health) } }
func withBreaker(f func(*breaker.Config)) fixtureOpt {
	return func(o *Options) { f(&o.Breaker) }
}
func withoutOnRemove() fixtureOpt { return func(o *Options) { o.OnRemove = nil } }

// newFixture builds a Manager with F=3, S=2, a 10 s interval and 5 s drain settle, breakers
// opening at 3 failures; call it inside the synctest bubble.
func newFixture(t *testing.T, opts ...fixtureOpt) *fixture {
	t.Helper()
	f := &fixture{t: t, pool: pool.New(pool.Config{StartPending: true}),
		reg: prometheus.NewRegistry(), probe: newScript(), logs: &syncBuffer{}}
	hc := health.DefaultConfig()
	hc.CheckIntervalSecs = 10
	bc := breaker.DefaultConfig()
	bc.FailureThreshold = 3
	o := Options{
		Pool: f.pool, NodeID: "gw-test", Health: hc, Breaker: bc, Registerer: f.reg,
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Probers: map[string]health.Prober{
			worker.ModeHTTP: f.probe, worker.ModeGRPC: f.probe, worker.ModeZMQ: f.probe, worker.ModeExternal: f.probe,
		},
		Listers: map[string]ModelLister{
			worker.ModeHTTP: f.probe, worker.ModeGRPC: f.probe, worker.ModeZMQ: f.probe, worker.ModeExternal: f.probe,
		},
		OnRemove: func(id worker.ID, epoch uint64, reason string) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.removed = append(f.removed, fmt.Sprintf("%s %d %s", id, epoch, reason))
		},
	}
	for _, opt := range opts {
		opt(&o)
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	t.Cleanup(m.Close)
	return f
}

// own puts spec in the pool and owns it; it returns the worker's id.
func (f *fixture) own(spec worker.Spec, epoch uint64) worker.ID {
	f.t.Helper()
	w, _, err := f.pool.Upsert(spec, pool.OriginLocal)
	if err != nil {
		f.t.Fatal(err)
	}
	f.m.Own(spec, epoch, false)
	return w.ID
}

func (f *fixture) removedCopy() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.removed...)
}

// health returns the pool's health of id and whether it is routable.
func (f *fixture) health(id worker.ID) (health.State, bool) {
	f.t.Helper()
	w := f.pool.Get(id)
	if w == nil {
		f.t.Fatalf("worker %s is not in the pool", id)
	}
	return w.Health(), w.Gates() == 0
}

// wantHealth checks the pool's view and the manager's Status of id.
func (f *fixture) wantHealth(id worker.ID, want health.State) {
	f.t.Helper()
	got, routable := f.health(id)
	if got != want || routable != (want == health.Ready) {
		f.t.Fatalf("pool health of %s = %v (routable %v), want %v", id, got, routable, want)
	}
	st, ok := f.m.Status(id)
	if !ok || st.Health != want {
		f.t.Fatalf("Status(%s) = %+v, %v; want health %v", id, st, ok, want)
	}
}

// metric reads one series of the fixture's registry.
func (f *fixture) metric(name string, labels ...string) float64 {
	f.t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	f.t.Fatalf("no series %s%v", name, labels)
	return 0
}

func httpSpec(port int) worker.Spec {
	return worker.Spec{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
}

type syncBuffer = logbuf.Buffer
