package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// leaderOf returns the leader g's /mesh/raft names, "" when none or when g did not answer.
func leaderOf(t *testing.T, g *clusterGW) string {
	t.Helper()
	var r raftAnswer
	if !getJSON(t, g, "/mesh/raft", &r) {
		return ""
	}
	return r.Leader
}

// A follower restarted with old state answers a write for a worker registered while it was down
// without a 404: C is killed, a worker is registered through A, C restarts on its state directory
// and a disable sent to it at once answers 200 (a 503 no_leader while it has no leader yet is
// retried; a 404 worker_not_found or a 409 revision_conflict is never acceptable). Then every
// gateway shows the disable.
func TestRestartedFollowerWritesWithoutStaleAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	engine := harness.StartEngine(t, b, "engine-late")
	gws := []*clusterGW{newClusterGW(t, "fa"), newClusterGW(t, "fb"), newClusterGW(t, "fc")}
	gws[0].start(t, b)
	gws[1].start(t, b, gws[0].meshAddr())
	gws[2].start(t, b, gws[0].meshAddr())
	waitFormed(t, gws...)

	gws[2].Kill()
	registered := time.Now()
	body := newAdmin(gws[0].Gateway, "").must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, engine.URL))
	t.Logf("registered through %s in %v while %s was down: %.300s", gws[0].id,
		time.Since(registered).Round(time.Millisecond), gws[2].id, body)

	gws[2].start(t, b, gws[0].meshAddr())
	restarted := time.Now()
	// One local read first (a few ms), only to tell whether the disable below meets a stale copy.
	staleCopy, _ := hasWorker(t, gws[2], engine.URL)
	staleCopy = !staleCopy
	c := newAdmin(gws[2].Gateway, "")
	path := "/workers/" + url.PathEscape(engine.URL)
	var retried []string
	var ans workerAnswer
	harness.WaitFor(t, clusterBound, "the disable on "+gws[2].id+" answers 200", func() bool {
		code, body := c.do(t, "PUT", path, `{"disabled": true}`)
		switch code {
		case 200:
			if err := json.Unmarshal([]byte(body), &ans); err != nil {
				t.Fatalf("the disable's answer: %v: %s", err, body)
			}
			return true
		case 503:
			retried = append(retried, errorCode(body))
			return false
		}
		t.Fatalf("the disable sent to %s %v after its restart answered %d (%s), want 200 (after %d retried 503s: %v)",
			gws[2].id, time.Since(restarted).Round(time.Millisecond), code, body, len(retried), retried)
		return false
	})
	t.Logf("the disable on %s answered 200 %v after its restart (its copy lacked the worker just before: %v), after %d retried 503s %v; fleet_ack %+v",
		gws[2].id, time.Since(restarted).Round(time.Millisecond), staleCopy, len(retried), retried, ans.FleetAck)
	for _, code := range retried {
		if code != "no_leader" {
			t.Errorf("the restarted follower answered 503 %s before 200; only no_leader is expected while it has no leader", code)
		}
	}
	if !ans.Disabled {
		t.Errorf("the disable's answer shows the worker enabled: %+v", ans)
	}

	// Fleet-acknowledged: a gateway that was not lagging shows the disable at once.
	lagging := map[string]bool{}
	if ans.FleetAck != nil {
		for _, id := range ans.FleetAck.Lagging {
			lagging[id] = true
		}
	}
	for _, g := range gws {
		if found, disabled := hasWorker(t, g, engine.URL); !lagging[g.id] && !(found && disabled) {
			t.Errorf("%s acknowledged the disable but its GET /workers shows found=%v disabled=%v right after", g.id, found, disabled)
		}
		harness.WaitFor(t, clusterBound, g.id+" shows the worker disabled", func() bool {
			found, disabled := hasWorker(t, g, engine.URL)
			return found && disabled
		})
	}
}

// A removal attempted while there is no leader completes once a leader returns: A (with
// --remove-unhealthy-workers, F = S = 1) owns a worker; B and C are killed, so A alone has no
// leader; the worker's /health fails until it is failed and A's removal waits for raft, its
// record still there; B and C restart, a leader is elected, and the record is gone from every
// gateway.
func TestRemovalWithoutLeaderCompletesLater(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	engine := harness.StartEngine(t, b, "engine-doomed")
	gws := []*clusterGW{
		newClusterGW(t, "ra", "--remove-unhealthy-workers", "--health-failure-threshold", "1",
			"--health-success-threshold", "1", "--health-check-interval-secs", "1"),
		newClusterGW(t, "rb"), newClusterGW(t, "rc"),
	}
	gws[0].start(t, b)
	gws[1].start(t, b, gws[0].meshAddr())
	gws[2].start(t, b, gws[0].meshAddr())
	waitFormed(t, gws...)
	a := newAdmin(gws[0].Gateway, "")
	a.must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, engine.URL))
	path := "/workers/" + url.PathEscape(engine.URL)
	var rec adminRecord
	harness.WaitFor(t, clusterBound, engine.Name+" ready and owned by "+gws[0].id, func() bool {
		code, body := a.do(t, "GET", path, "")
		return code == 200 && json.Unmarshal([]byte(body), &rec) == nil && rec.HealthState == "ready"
	})
	if rec.Owner != gws[0].id {
		t.Fatalf("the worker registered on %s is owned by %q", gws[0].id, rec.Owner)
	}

	gws[1].Kill()
	gws[2].Kill()
	harness.WaitFor(t, clusterBound, gws[0].id+" alone has no leader", func() bool { return leaderOf(t, gws[0]) == "" })
	fault(t, engine, `{"health_status":503}`)
	faulted := time.Now()
	const waiting = "removing a worker record waits for raft"
	harness.WaitFor(t, clusterBound, gws[0].id+" logs "+waiting, func() bool {
		return strings.Contains(gws[0].Output(), waiting)
	})
	t.Logf("%s logged %q %v after the engine's health failed", gws[0].id, waiting, time.Since(faulted).Round(time.Millisecond))
	if found, _ := hasWorker(t, gws[0], engine.URL); !found {
		t.Fatalf("%s no longer lists the worker although its removal waits for raft", gws[0].id)
	}
	if l := leaderOf(t, gws[0]); l != "" {
		t.Fatalf("%s names leader %q with its two peers down", gws[0].id, l)
	}

	gws[1].start(t, b, gws[0].meshAddr())
	gws[2].start(t, b, gws[0].meshAddr())
	harness.WaitFor(t, clusterBound, "a leader again", func() bool { return leaderOf(t, gws[0]) != "" })
	elected := time.Now()
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, g.id+" no longer lists the failed worker", func() bool {
			var list struct {
				Workers []struct {
					URL string `json:"url"`
				} `json:"workers"`
			}
			if !getJSON(t, g, "/workers", &list) {
				return false
			}
			for _, w := range list.Workers {
				if w.URL == engine.URL {
					return false
				}
			}
			return true
		})
	}
	t.Logf("the record was gone from every gateway %v after a leader was elected", time.Since(elected).Round(time.Millisecond))
	if !strings.Contains(gws[0].Output(), "worker record removed") {
		t.Errorf("%s did not log the removal it retried", gws[0].id)
	}
}
