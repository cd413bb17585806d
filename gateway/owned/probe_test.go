package owned

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/test/fakeengine"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// These tests probe real servers on loopback with the real probers, on real time: a 1 s
// interval, F=2, S=2.

// live is a Manager with the default probers.
type live struct {
	t    *testing.T
	pool *pool.Pool
	m    *Manager
	logs *syncBuffer
}

func newLive(t *testing.T) *live {
	t.Helper()
	return newLiveWith(t, pool.Config{})
}

// newLiveWith is newLive over a pool configured by pc (its workers start pending).
func newLiveWith(t *testing.T, pc pool.Config) *live {
	t.Helper()
	pc.StartPending = true
	l := &live{t: t, pool: pool.New(pc), logs: &syncBuffer{}}
	hc := health.DefaultConfig()
	hc.CheckIntervalSecs, hc.FailureThreshold, hc.SuccessThreshold, hc.TimeoutSecs = 1, 2, 2, 2
	m, err := New(Options{
		Pool: l.pool, NodeID: "gw-live", Health: hc, Breaker: breaker.DefaultConfig(),
		Registerer: prometheus.NewRegistry(),
		Logger:     slog.New(slog.NewTextHandler(l.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	l.m = m
	t.Cleanup(m.Close)
	return l
}

func (l *live) own(spec worker.Spec) worker.ID {
	l.t.Helper()
	w, _, err := l.pool.Upsert(spec, pool.OriginLocal)
	if err != nil {
		l.t.Fatal(err)
	}
	l.m.Own(spec, 1, false)
	return w.ID
}

// waitHealth waits until the pool's health of id is want.
func (l *live) waitHealth(id worker.ID, want health.State, within time.Duration) {
	l.t.Helper()
	testkit.Within(l.t, within, "health "+want.String(), func() bool { return l.pool.Get(id).Health() == want })
}

func startEngine(t *testing.T, grpc bool) (*fakeengine.Engine, string) {
	t.Helper()
	e := fakeengine.New(fakeengine.Config{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { e.Close() })
	start := e.Start
	if grpc {
		start = e.StartGRPC
	}
	url, err := start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return e, url
}

func setHealth(t *testing.T, e *fakeengine.Engine, status int) {
	t.Helper()
	f := e.Faults()
	f.HealthStatus = status
	if err := e.SetFaults(f); err != nil {
		t.Fatal(err)
	}
}

// An engine whose health turns 503 (HTTP) or NOT_SERVING (gRPC) leaves routing after F probes
// and comes back after S; the probes name this gateway.
func TestEngineLeavesAndRejoins(t *testing.T) {
	for _, mode := range []string{"http", "grpc"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			l := newLive(t)
			e, url := startEngine(t, mode == "grpc")
			id := l.own(worker.Spec{URL: url})
			l.waitHealth(id, health.Ready, 5*time.Second)
			setHealth(t, e, 503)
			l.waitHealth(id, health.NotReady, 10*time.Second)
			st, _ := l.m.Status(id)
			want := "status 503"
			if mode == "grpc" {
				want = "NOT_SERVING"
			}
			if st.LastError != want || st.ConsecutiveFailures < 2 {
				t.Errorf("status when not ready: %+v, want last_error %q", st, want)
			}
			setHealth(t, e, 200)
			l.waitHealth(id, health.Ready, 10*time.Second)
			if got := e.Stats().ByGateway["gw-live"].Probes; got < 5 {
				t.Errorf("engine counted %d probes from gw-live, want at least 5", got)
			}
		})
	}
}

// The probe sends the worker's API key as a bearer token; the key is in no log line and no
// status, even when probes fail.
func TestProbeSendsKeyAndNeverLogsIt(t *testing.T) {
	t.Parallel()
	const key = "sk-live-secret-7f3a"
	var mu sync.Mutex
	var auth []string
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Mesh-Gateway"))
		mu.Unlock()
		if fail.Load() {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(srv.Close)
	l := newLive(t)
	id := l.own(worker.Spec{URL: srv.URL, APIKey: key})
	l.waitHealth(id, health.Ready, 5*time.Second)
	fail.Store(true)
	l.waitHealth(id, health.NotReady, 10*time.Second)
	mu.Lock()
	first := auth[0]
	mu.Unlock()
	if want := "/health Bearer " + key + " gw-live"; first != want {
		t.Errorf("probe sent %q, want %q", first, want)
	}
	if st, _ := l.m.Status(id); strings.Contains(st.LastError, key) || st.LastStatusCode != 401 {
		t.Errorf("status %+v", st)
	}
	if strings.Contains(l.logs.String(), key) {
		t.Errorf("the API key reached the logs:\n%s", l.logs.String())
	}
	if len(l.logs.Lines("health probe failed")) == 0 {
		t.Error("no debug line for the failed probes: the check above proves nothing")
	}
}

// An external provider with health checks turned on stays healthy on a 401 (Rolter).
func TestExternalProviderUnauthorizedIsHealthy(t *testing.T) {
	t.Parallel()
	var probes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			probes.Add(1)
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	l := newLive(t)
	id := l.own(worker.Spec{URL: srv.URL + "/v1", ConnectionMode: worker.ModeExternal, Provider: "openai",
		Health: &worker.Health{DisableHealthCheck: ptr(false)}})
	l.waitHealth(id, health.Ready, 5*time.Second)
	testkit.Within(t, 5*time.Second, "two more probes", func() bool { return probes.Load() >= 4 })
	if h := l.pool.Get(id).Health(); h != health.Ready {
		t.Errorf("health after 401 probes: %v", h)
	}
}

// A worker whose /health never answers does not delay the probes of the others: the healthy
// engine gets three probes (1 s apart) while the hanging probe waits out its 5 s timeout.
func TestHangingWorkerDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	quit := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-quit:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(quit) })
	l := newLive(t)
	e, url := startEngine(t, false)
	slow := l.own(worker.Spec{URL: hang.URL, Health: &worker.Health{TimeoutSecs: ptr(5)}})
	start := time.Now()
	fast := l.own(worker.Spec{URL: url})
	testkit.Within(t, 4*time.Second, "three probes of the healthy engine", func() bool {
		return e.Stats().Probes >= 3
	})
	if st, _ := l.m.Status(slow); !st.LastProbe.IsZero() {
		t.Fatalf("the hanging probe ended after %v: the test proves nothing", time.Since(start))
	}
	if h := l.pool.Get(fast).Health(); h != health.Ready {
		t.Errorf("healthy engine is %v", h)
	}
}
