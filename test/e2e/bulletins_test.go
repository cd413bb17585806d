package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// bulletinBound bounds the propagation of a health change from a worker's owner to the other
// gateways: the owner's bulletin must reach them within 1 s of the owner showing the change.
// The test allows a little more for its own 20 ms polling and HTTP round trips.
const bulletinBound = 1200 * time.Millisecond

// bulWorker is one worker of GET /workers as the bulletin test reads it: the runtime state a
// gateway shows of a worker, imported from its owner's bulletins when it does not own it.
type bulWorker struct {
	URL         string          `json:"url"`
	Owner       string          `json:"owner"`
	Origin      string          `json:"origin"`
	HealthState string          `json:"health_state"`
	Routable    bool            `json:"routable"`
	Stale       bool            `json:"stale"`
	Breaker     json.RawMessage `json:"breaker"`
}

// breakerState is the "state" of the record's breaker object; "" when there is none, and the
// raw JSON when it is not an object with a state.
func (w bulWorker) breakerState() string {
	if len(w.Breaker) == 0 || string(w.Breaker) == "null" {
		return ""
	}
	var b struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal(w.Breaker, &b); err != nil || b.State == "" {
		return "unexpected breaker " + string(w.Breaker)
	}
	return b.State
}

func (w bulWorker) String() string {
	if w.URL == "" {
		return "(not listed)"
	}
	b := w.breakerState()
	if b == "" {
		b = "none"
	}
	return fmt.Sprintf("{owner %s origin %s health_state %q routable %v stale %v breaker %s}",
		w.Owner, w.Origin, w.HealthState, w.Routable, w.Stale, b)
}

var bulClient = &http.Client{Timeout: 2 * time.Second}

// bulWorkers returns the gateway's GET /workers by URL, or an error when it did not answer.
func bulWorkers(g *harness.Gateway) (map[string]bulWorker, error) {
	resp, err := bulClient.Get(g.URL + "/workers")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /workers: %d", resp.StatusCode)
	}
	var list struct {
		Workers []bulWorker `json:"workers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("GET /workers: %v", err)
	}
	out := make(map[string]bulWorker, len(list.Workers))
	for _, w := range list.Workers {
		out[w.URL] = w
	}
	return out, nil
}

// bulPoll polls cond every 20 ms until it holds (true) or d passes (false).
func bulPoll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// bulWaitWorker waits up to d until g shows the worker of u in a state ok accepts, and fails
// the test with what g showed last otherwise. It returns the time it took.
func bulWaitWorker(t *testing.T, g *clusterGW, u, what string, d time.Duration, ok func(bulWorker) bool) time.Duration {
	t.Helper()
	start := time.Now()
	var last bulWorker
	var lastErr error
	if bulPoll(d, func() bool {
		ws, err := bulWorkers(g.Gateway)
		lastErr = err
		if err != nil {
			return false
		}
		last = ws[u]
		return ok(last)
	}) {
		return time.Since(start)
	}
	if lastErr != nil {
		t.Fatalf("%s: after %v %s does not answer GET /workers: %v", what, d, g.id, lastErr)
	}
	t.Fatalf("%s: after %v %s still shows %s as %v", what, d, g.id, u, last)
	return 0
}

// bulRequests returns the chat requests engine e counted from each gateway, by node id.
func bulRequests(t *testing.T, e *harness.Proc, gws ...*clusterGW) map[string]int64 {
	t.Helper()
	out := make(map[string]int64, len(gws))
	for _, g := range gws {
		out[g.id], _ = engineStats(t, e, g.id)
	}
	return out
}

// bulRegister registers spec (a JSON body) through g, retrying while g answers 5xx (a gateway
// just resumed may have no leader yet).
func bulRegister(t *testing.T, g *clusterGW, spec string) {
	t.Helper()
	var code int
	var body string
	if !bulPoll(clusterBound, func() bool {
		code, body = newAdmin(g.Gateway, "").do(t, "POST", "/workers", spec)
		return code == http.StatusCreated || code == http.StatusOK
	}) {
		t.Fatalf("POST /workers %s through %s: %d %s", spec, g.id, code, body)
	}
}

// TestBulletins: three gateways A, B and C; three engines registered on A, which owns them. A
// alone probes them; B and C import A's runtime state from its bulletins and report the
// outcomes of the requests they proxy to A's workers to A, whose breaker decides for the whole
// fleet:
//  1. only A probes the engines;
//  2. an engine whose /health turns 503 is not_ready and unroutable on B and C within 1 s of A
//     showing it, and B and C send it no request;
//  3. an engine answering 500 to requests sent through B alone opens A's breaker (B's outcome
//     reports), B and C show that breaker open, and no gateway sends it requests any more;
//  4. A paused with SIGSTOP: B and C mark its workers stale within a few seconds and keep routing
//     to the ready one (not to the not_ready one, nor the one whose breaker is open);
//  5. an ipc:// worker registered on A is host-local: B and C never list it.
func TestBulletins(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	start := time.Now()
	bins := harness.Build(t)
	e1 := harness.StartEngine(t, bins, "engine-bul-1")
	e2 := harness.StartEngine(t, bins, "engine-bul-2")
	e3 := harness.StartEngine(t, bins, "engine-bul-3")
	engines := []*harness.Proc{e1, e2, e3}

	// A probe a second (newClusterGW), F=2, S=2; three failed requests open a breaker, which
	// stays open for the rest of the test; a failover grace far longer than the test, so that
	// A's workers keep their owner while A is paused; quick retries; round_robin, so that the
	// same chats sent again still reach every routable engine (cache_aware, the default, would
	// keep each where it went first).
	extra := []string{"--policy", "round_robin", "--health-failure-threshold", "2", "--health-success-threshold", "2",
		"--health-check-timeout-secs", "3", "--cb-failure-threshold", "3", "--cb-timeout-duration-secs", "120",
		"--owner-failover-grace-secs", "600", "--retry-initial-backoff-ms", "1", "--retry-max-backoff-ms", "5"}
	a, b, c := newClusterGW(t, "gw-a", extra...), newClusterGW(t, "gw-b", extra...), newClusterGW(t, "gw-c", extra...)
	a.start(t, bins)
	b.start(t, bins, a.meshAddr())
	c.start(t, bins, a.meshAddr())
	gws := []*clusterGW{a, b, c}
	leader := waitFormed(t, gws...)
	t.Logf("formed in %v; leader %s", time.Since(start).Round(time.Millisecond), leader)

	for _, e := range engines {
		newAdmin(a.Gateway, "").must(t, http.StatusCreated, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, e.URL))
	}
	for _, e := range engines {
		bulWaitWorker(t, a, e.URL, "A owns and readies "+e.Name, clusterBound, func(w bulWorker) bool {
			return w.Owner == a.id && w.Origin == "local" && w.HealthState == "ready" && w.Routable
		})
		for _, g := range []*clusterGW{b, c} {
			bulWaitWorker(t, g, e.URL, g.id+" imports "+e.Name+" from A", clusterBound, func(w bulWorker) bool {
				return w.Owner == a.id && w.Origin == "mesh"
			})
		}
	}
	// Every gateway routes to every engine before the faults: the changes below are seen from
	// a known start.
	for _, g := range []*clusterGW{b, c} {
		for _, e := range engines {
			bulWaitWorker(t, g, e.URL, g.id+" shows "+e.Name+" ready and routable", clusterBound, func(w bulWorker) bool {
				return w.HealthState == "ready" && w.Routable
			})
		}
	}
	t.Logf("three engines registered on A, listed by B and C, %v after the start", time.Since(start).Round(time.Millisecond))

	t.Run("1_only_the_owner_probes", func(t *testing.T) {
		for _, e := range engines {
			harness.WaitFor(t, clusterBound, "A probed "+e.Name+" three times", func() bool {
				_, probes := engineStats(t, e, a.id)
				return probes >= 3
			})
		}
		for _, e := range engines {
			_, pa := engineStats(t, e, a.id)
			for _, g := range []*clusterGW{b, c} {
				if _, p := engineStats(t, e, g.id); p != 0 {
					t.Errorf("%s probed %s %d times (A %d); only its owner A may probe it", g.id, e.Name, p, pa)
				}
			}
			t.Logf("%s: %d probes from A", e.Name, pa)
		}
	})

	t.Run("2_health_fault_reaches_B_and_C_within_1s", func(t *testing.T) {
		fault(t, e1, `{"health_status":503}`)
		seen := map[string]time.Time{}
		last := map[string]bulWorker{}
		var tA time.Time
		deadline := time.Now().Add(clusterBound)
		bulPoll(2*clusterBound, func() bool {
			for _, g := range gws {
				if _, ok := seen[g.id]; ok {
					continue
				}
				ws, err := bulWorkers(g.Gateway)
				if err != nil {
					continue
				}
				w := ws[e1.URL]
				last[g.id] = w
				if w.HealthState == "not_ready" && !w.Routable {
					seen[g.id] = time.Now()
				}
			}
			if tA.IsZero() {
				if ts, ok := seen[a.id]; ok {
					tA, deadline = ts, ts.Add(bulletinBound)
				}
			}
			return len(seen) == len(gws) || time.Now().After(deadline)
		})
		if tA.IsZero() {
			t.Fatalf("A does not show engine 1 not_ready %v after its /health turned 503: %v", clusterBound, last[a.id])
		}
		for _, g := range []*clusterGW{b, c} {
			ts, ok := seen[g.id]
			if !ok {
				t.Errorf("%s still shows engine 1 as %v %v after A showed it not_ready; want not_ready, routable false within 1 s",
					g.id, last[g.id], bulletinBound)
				continue
			}
			lag := max(ts.Sub(tA), 0)
			t.Logf("%s showed engine 1 not_ready and unroutable %v after A", g.id, lag.Round(time.Millisecond))
			if lag > bulletinBound {
				t.Errorf("%s showed engine 1 not_ready %v after A; want within 1 s", g.id, lag)
			}
		}

		before := bulRequests(t, e1, b, c)
		sendChats(t, b.Gateway, 30, http.StatusOK)
		sendChats(t, c.Gateway, 30, http.StatusOK)
		after := bulRequests(t, e1, b, c)
		for _, g := range []*clusterGW{b, c} {
			if n := after[g.id] - before[g.id]; n != 0 {
				t.Errorf("%s sent %d of its 30 requests to engine 1, which its owner A shows not_ready", g.id, n)
			}
		}
	})

	t.Run("3_outcome_reports_open_the_owners_breaker", func(t *testing.T) {
		fault(t, e2, `{"error_status":500,"error_rate":1}`)
		before := bulRequests(t, e2, a, b, c)
		sendChats(t, b.Gateway, 30, http.StatusOK)
		after := bulRequests(t, e2, a, b, c)
		hits := after[b.id] - before[b.id]
		if hits < 3 {
			t.Fatalf("B sent only %d of 30 requests to engine 2: not enough failures to open a breaker (threshold 3)", hits)
		}
		if n := after[a.id] - before[a.id] + after[c.id] - before[c.id]; n != 0 {
			t.Fatalf("A and C sent %d requests to engine 2; only B was sent requests", n)
		}
		t.Logf("B sent %d requests to engine 2, each answered 500", hits)

		opened := time.Now()
		bulWaitWorker(t, a, e2.URL, fmt.Sprintf("A's breaker opens after B's %d failed requests to engine 2 (outcome reports)", hits),
			clusterBound, func(w bulWorker) bool { return w.breakerState() == "open" })
		t.Logf("A shows engine 2's breaker open %v after B's requests", time.Since(opened).Round(time.Millisecond))
		if ws, err := bulWorkers(a.Gateway); err != nil || ws[e2.URL].HealthState != "ready" {
			t.Errorf("A shows engine 2 as %v (%v); its /health answers 200, so it should stay ready", ws[e2.URL], err)
		}
		for _, g := range []*clusterGW{b, c} {
			var last bulWorker
			if !bulPoll(clusterBound, func() bool {
				ws, err := bulWorkers(g.Gateway)
				if err != nil {
					return false
				}
				last = ws[e2.URL]
				return last.breakerState() == "open"
			}) {
				t.Errorf("%s shows engine 2 as %v; want breaker state open, as its owner A shows it", g.id, last)
				continue
			}
			t.Logf("%s shows engine 2's breaker open %v after B's requests", g.id, time.Since(opened).Round(time.Millisecond))
		}

		before = bulRequests(t, e2, a, b, c)
		for _, g := range gws {
			sendChats(t, g.Gateway, 20, http.StatusOK)
		}
		after = bulRequests(t, e2, a, b, c)
		for _, g := range gws {
			if n := after[g.id] - before[g.id]; n != 0 {
				t.Errorf("%s sent %d of its 20 requests to engine 2, whose breaker A holds open", g.id, n)
			}
		}
	})

	t.Run("4_owner_paused_its_workers_turn_stale", func(t *testing.T) {
		var once sync.Once
		resume := func() {
			once.Do(func() {
				if err := a.Signal(syscall.SIGCONT); err != nil {
					t.Logf("SIGCONT to A: %v", err)
				}
			})
		}
		// Runs before the harness kills A (cleanups run last in, first out), and at the end of
		// this step whatever happens.
		t.Cleanup(resume)
		defer resume()
		if err := a.Signal(syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP to A: %v", err)
		}
		stopped := time.Now()
		for _, g := range []*clusterGW{b, c} {
			for _, e := range engines {
				bulWaitWorker(t, g, e.URL, g.id+" marks "+e.Name+" stale while its owner A is paused", 10*time.Second,
					func(w bulWorker) bool { return w.Stale })
			}
			t.Logf("%s shows A's three workers stale %v after the SIGSTOP (rule: older than 3 × 1 s)",
				g.id, time.Since(stopped).Round(time.Millisecond))
		}
		for _, g := range []*clusterGW{b, c} {
			if ws, err := bulWorkers(g.Gateway); err == nil {
				t.Logf("%s while A is paused: engine 1 %v, engine 2 %v, engine 3 %v", g.id, ws[e1.URL], ws[e2.URL], ws[e3.URL])
			}
		}

		before := [3]map[string]int64{}
		for i, e := range engines {
			before[i] = bulRequests(t, e, b, c)
		}
		for _, g := range []*clusterGW{b, c} {
			sendChats(t, g.Gateway, 20, http.StatusOK)
		}
		for i, e := range engines {
			after := bulRequests(t, e, b, c)
			for _, g := range []*clusterGW{b, c} {
				n := after[g.id] - before[i][g.id]
				switch {
				case i < 2 && n != 0:
					t.Errorf("%s sent %d of its 20 requests to %s while A was paused (its last known state: not routable)", g.id, n, e.Name)
				case i == 2 && n < 20:
					t.Errorf("%s sent only %d of its 20 requests to %s, the one ready worker, while A was paused", g.id, n, e.Name)
				}
			}
		}
		resume()
		harness.WaitFor(t, clusterBound, "A answers /liveness after SIGCONT", func() bool {
			return harness.Get(a.URL+"/liveness") == http.StatusOK
		})
		for _, g := range []*clusterGW{b, c} {
			bulWaitWorker(t, g, e3.URL, g.id+" shows engine 3 fresh again once A resumed", clusterBound,
				func(w bulWorker) bool { return !w.Stale && w.HealthState == "ready" && w.Routable })
		}
		t.Logf("A resumed; B and C show its state fresh again %v after the SIGSTOP", time.Since(stopped).Round(time.Millisecond))
	})

	t.Run("5_ipc_workers_stay_on_their_owner", func(t *testing.T) {
		// A short folder: a unix socket path is limited to 107 bytes.
		dir, err := os.MkdirTemp("", "bul-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		ipc := harness.StartEngine(t, bins, "engine-bul-ipc", "--mode", "zmq", "--listen", "ipc://"+filepath.Join(dir, "x.sock"))
		if !strings.HasPrefix(ipc.URL, "ipc:///") {
			t.Fatalf("the ipc engine listens on %q", ipc.URL)
		}
		// A worker registered after it: once B and C list this one, they have applied
		// everything written before it, the ipc worker's registration included.
		marker := harness.StartEngine(t, bins, "engine-bul-4")
		bulRegister(t, a, fmt.Sprintf(`{"url":%q,"connection_mode":"zmq"}`, ipc.URL))
		bulRegister(t, a, fmt.Sprintf(`{"url":%q}`, marker.URL))
		bulWaitWorker(t, a, ipc.URL, "A lists the ipc worker it owns", clusterBound, func(w bulWorker) bool {
			return w.Owner == a.id && w.Origin == "local"
		})

		listed := func(g *clusterGW) bool {
			ws, err := bulWorkers(g.Gateway)
			if err != nil {
				return false
			}
			if w, ok := ws[ipc.URL]; ok {
				t.Errorf("%s lists the ipc worker A owns: %v; an ipc:// worker is host-local to its owner", g.id, w)
				return true
			}
			return false
		}
		for _, g := range []*clusterGW{b, c} {
			harness.WaitFor(t, clusterBound, g.id+" lists the http worker registered on A after the ipc one", func() bool {
				if listed(g) {
					t.FailNow()
				}
				ws, err := bulWorkers(g.Gateway)
				_, ok := ws[marker.URL]
				return err == nil && ok
			})
		}
		watched := time.Now()
		bulPoll(3*time.Second, func() bool { return listed(b) || listed(c) })
		if !t.Failed() {
			t.Logf("B and C did not list the ipc worker in %v after they listed the worker registered after it",
				time.Since(watched).Round(time.Millisecond))
		}
	})
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}
