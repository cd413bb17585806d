package e2e

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/meshgw/meshgw/test/harness"
)

// TestTransferKeepsOpenCircuit: an engine answering 500 opens its circuit on its owner t1; a
// transfer hands it to t2, which takes the open circuit over from t1's last bulletin (DESIGN.md
// section 5) instead of starting closed: t2 shows it open at once, as owner, and no request
// through either gateway reaches the engine after the move, until the open timeout (an hour
// here) would let one try. The former owner t1 keeps its own last state until t2's first
// bulletin reaches it: the transfer's answer is fleet-acknowledged (t1 applied the move), and
// t1's view is read, and its requests sent, at once, while that bulletin is usually still on
// its way (a former owner that dropped its state there routed to the engine in that window,
// about one run in three).
func TestTransferKeepsOpenCircuit(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	bad := harness.StartEngine(t, b, "engine-500")
	good := harness.StartEngine(t, b, "engine-ok")
	args := []string{"--cb-failure-threshold", "3", "--cb-timeout-duration-secs", "3600",
		"--retry-initial-backoff-ms", "1", "--retry-max-backoff-ms", "5"}
	t1, t2 := newClusterGW(t, "t1", args...), newClusterGW(t, "t2", args...)
	t1.start(t, b)
	t2.start(t, b, t1.meshAddr())
	waitFormed(t, t1, t2)
	admin := newAdmin(t1.Gateway, "")
	for _, e := range []*harness.Proc{bad, good} {
		admin.must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q,"owner":"t1"}`, e.URL))
	}
	for _, g := range []*clusterGW{t1, t2} {
		waitHealth(t, g.Gateway, bad.URL, "ready", clusterBound)
		waitHealth(t, g.Gateway, good.URL, "ready", clusterBound)
	}
	fault(t, bad, `{"error_status":500}`)
	sendChats(t, t1.Gateway, 12, http.StatusOK) // retries move each failed one to the good engine
	id := ""
	harness.WaitFor(t, clusterBound, "t2 sees t1's open circuit in its bulletin", func() bool {
		w := workers(t, t2.Gateway)[bad.URL]
		id = w.ID
		return w.Breaker != nil && w.Breaker.State == "open"
	})

	before, _ := engineStats(t, bad, "t2")
	beforeT1, _ := engineStats(t, bad, "t1")
	admin.must(t, 200, "POST", "/workers/"+id+"/transfer", `{"to":"t2"}`)
	// First thing, the former owner, which has applied the move: ready (not unknown), not
	// routable, breaker open, whether from its own last state or from t2's first bulletin.
	if w := workers(t, t1.Gateway)[bad.URL]; w.Routable || w.HealthState != "ready" || w.Breaker == nil || w.Breaker.State != "open" {
		t.Errorf("t1, right after handing the worker over: routable %v, health %s, breaker %+v; want not routable, ready, open",
			w.Routable, w.HealthState, w.Breaker)
	}
	sendChats(t, t1.Gateway, 20, http.StatusOK)
	for _, g := range []*clusterGW{t1, t2} {
		if w, ok := workerOn(t, g, bad.URL); !ok || w.Owner != "t2" {
			t.Fatalf("%s: after the transfer: %+v", g.id, w)
		}
	}
	// t2 now runs the breaker; it must read open from the start, not closed.
	w := workers(t, t2.Gateway)[bad.URL]
	if w.Breaker == nil || w.Breaker.State != "open" {
		t.Fatalf("t2, the new owner, shows the breaker %+v; want open, taken over from t1", w.Breaker)
	}
	sendChats(t, t2.Gateway, 20, http.StatusOK)
	if after, _ := engineStats(t, bad, "t2"); after != before {
		t.Errorf("t2 sent %d requests to the engine whose circuit it took over open", after-before)
	}
	if after, _ := engineStats(t, bad, "t1"); after != beforeT1 {
		t.Errorf("t1 sent %d requests to the engine whose open circuit it handed over", after-beforeT1)
	}
	// t1 keeps showing the circuit open, as it handed it over or as t2's bulletins say.
	if w := workers(t, t1.Gateway)[bad.URL]; w.Routable || w.Breaker == nil || w.Breaker.State != "open" {
		t.Errorf("t1 after the requests: routable %v, breaker %+v; want not routable, open", w.Routable, w.Breaker)
	}
	if w := workers(t, t2.Gateway)[bad.URL]; w.Breaker == nil || w.Breaker.State != "open" {
		t.Errorf("t2's breaker after the requests: %+v; want still open", w.Breaker)
	}
}
