package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// requestsByGateway returns the model requests an engine counted from each gateway.
func requestsByGateway(t *testing.T, e *harness.Proc) map[string]int64 {
	t.Helper()
	resp, err := http.Get(control(e) + "/_stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		ByGateway map[string]struct {
			Requests int64 `json:"requests"`
		} `json:"by_gateway"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for g, c := range s.ByGateway {
		out[g] = c.Requests
	}
	return out
}

// drainView is what the drain test reads of a worker in GET /workers.
type drainView struct {
	URL           string     `json:"url"`
	Owner         string     `json:"owner"`
	HealthState   string     `json:"health_state"`
	Routable      bool       `json:"routable"`
	DrainDeadline *time.Time `json:"drain_deadline"`
}

// drainViewOn returns u as g lists it; ok is false when g does not list it (or did not answer).
func drainViewOn(t *testing.T, g *clusterGW, u string) (drainView, bool) {
	t.Helper()
	var list struct {
		Workers []drainView `json:"workers"`
	}
	if !getJSON(t, g, "/workers", &list) {
		return drainView{}, false
	}
	for _, w := range list.Workers {
		if w.URL == u {
			return w, true
		}
	}
	return drainView{}, false
}

// A DELETE's 202 is a promise kept across the owner's crash: a ready worker owned by A is
// DELETEd through B (a non-owner) with a 6 s settle; A is killed with SIGKILL before the settle
// ends and stays down past it, so the record must outlive both A's process and the settle; no
// other gateway removes it, since A still owns it. A restarts on its state directory, finds the
// draining record and removes it. From the DELETE's answer on, no gateway, the restarted A
// included, sends the worker a request, while a second worker keeps serving.
func TestDeleteDrainSurvivesOwnerCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const settle = 6 * time.Second
	b := harness.Build(t)
	doomed := harness.StartEngine(t, b, "engine-doomed")
	spare := harness.StartEngine(t, b, "engine-spare")
	// A long grace: A's workers must not fail over while it is down, so that A itself, back on
	// its state directory, is the owner that finishes the drain.
	grace := []string{"--owner-failover-grace-secs", "600"}
	gws := []*clusterGW{newClusterGW(t, "da", grace...), newClusterGW(t, "db", grace...), newClusterGW(t, "dc", grace...)}
	owner, taker, third := gws[0], gws[1], gws[2]
	owner.start(t, b)
	taker.start(t, b, owner.meshAddr())
	third.start(t, b, owner.meshAddr())
	waitFormed(t, gws...)
	a := newAdmin(owner.Gateway, "")
	a.must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q,"health":{"drain_settle_secs":%d}}`, doomed.URL, int(settle/time.Second)))
	a.must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, spare.URL))
	for _, g := range gws {
		for _, e := range []*harness.Proc{doomed, spare} {
			harness.WaitFor(t, clusterBound, g.id+" sees "+e.Name+" ready, owned by "+owner.id, func() bool {
				w, ok := drainViewOn(t, g, e.URL)
				return ok && w.Owner == owner.id && w.HealthState == "ready" && w.Routable
			})
		}
	}
	client := &http.Client{Timeout: 10 * time.Second}
	serve := func(g *clusterGW, n int, what string) {
		t.Helper()
		for i := range n {
			if code, body, err := chat(client, g.URL, fmt.Sprintf("%s %d via %s", what, i, g.id)); err != nil || code != 200 {
				t.Fatalf("chat %d via %s %s: %d %v %.200s", i, g.id, what, code, err, body)
			}
		}
	}
	for _, g := range gws {
		serve(g, 4, "before the DELETE")
	}

	sent := time.Now()
	code, body := newAdmin(taker.Gateway, "").do(t, "DELETE", workerPath(doomed), "")
	answered := time.Now()
	before := requestsByGateway(t, doomed)
	var ans struct {
		Status          string     `json:"status"`
		DrainSettleSecs float64    `json:"drain_settle_secs"`
		DrainDeadline   *time.Time `json:"drain_deadline"`
		FleetAck        *struct {
			Acked, Lagging []string
		} `json:"fleet_ack"`
	}
	if err := json.Unmarshal([]byte(body), &ans); err != nil || code != 202 || ans.Status != "draining" || ans.DrainDeadline == nil {
		t.Fatalf("DELETE through %s: %d %s", taker.id, code, body)
	}
	deadline := *ans.DrainDeadline
	if ans.DrainSettleSecs != settle.Seconds() || deadline.Before(sent) || deadline.After(answered.Add(settle)) {
		t.Fatalf("DELETE answer %s: want a %v settle from the DELETE", body, settle)
	}
	owner.Kill()
	killed := time.Now()
	if !killed.Before(deadline) {
		t.Fatalf("the owner was killed %v after the drain's deadline: the machine is too slow for this test", killed.Sub(deadline))
	}
	t.Logf("DELETE through %s answered 202 in %v (fleet_ack %+v); %s killed %v before the deadline",
		taker.id, answered.Sub(sent).Round(time.Millisecond), ans.FleetAck, owner.id, deadline.Sub(killed).Round(time.Millisecond))

	// Fleet-acknowledged: the gateways that acknowledged show the drain at once.
	lagging := map[string]bool{}
	if ans.FleetAck != nil {
		for _, id := range ans.FleetAck.Lagging {
			lagging[id] = true
		}
	}
	for _, g := range []*clusterGW{taker, third} {
		w, ok := drainViewOn(t, g, doomed.URL)
		if !lagging[g.id] && (!ok || w.HealthState != "draining" || w.Routable) {
			t.Errorf("%s acknowledged the drain but shows %+v (listed %v)", g.id, w, ok)
		}
	}
	serve(taker, 6, "owner down, draining")
	serve(third, 6, "owner down, draining")

	// The settle ends while the owner is down: the record stays, draining, on the others.
	harness.WaitFor(t, clusterBound, "the drain's deadline to pass", func() bool { return time.Now().After(deadline) })
	for _, g := range []*clusterGW{taker, third} {
		if w, ok := drainViewOn(t, g, doomed.URL); !ok || w.HealthState != "draining" || w.DrainDeadline == nil || !w.DrainDeadline.Equal(deadline) {
			t.Fatalf("%s after the deadline, with the owner down: %+v (listed %v); want the record still draining", g.id, w, ok)
		}
	}

	owner.start(t, b, taker.meshAddr())
	restarted := time.Now()
	// Its own workers start pending after a restart (health is not durable) until a probe passes.
	harness.WaitFor(t, clusterBound, "the restarted "+owner.id+" to serve", func() bool {
		code, _, err := chat(client, owner.URL, "restarted owner, first")
		return err == nil && code == 200
	})
	serve(owner, 6, "restarted owner")
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, g.id+" no longer lists the drained worker", func() bool {
			_, listed := drainViewOn(t, g, doomed.URL)
			code, _ := newAdmin(g.Gateway, "").do(t, "GET", "/workers", "")
			return code == 200 && !listed
		})
	}
	t.Logf("the record was gone from every gateway %v after %s restarted", time.Since(restarted).Round(time.Millisecond), owner.id)
	if out := owner.Output(); !strings.Contains(out, "worker record removed") {
		t.Errorf("the restarted %s did not log the removal it finished", owner.id)
	}
	for _, g := range gws {
		serve(g, 4, "after the removal")
	}
	after := requestsByGateway(t, doomed)
	for _, g := range gws {
		if after[g.id] != before[g.id] {
			t.Errorf("%s sent %d requests to the draining worker after the DELETE answered", g.id, after[g.id]-before[g.id])
		}
	}
	t.Logf("requests to the drained worker by gateway: %v at the answer, %v at the end", before, after)
}
