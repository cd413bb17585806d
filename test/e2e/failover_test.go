package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// failoverBound bounds the failover of a killed owner's workers: the mesh's failure detection
// (a few seconds with --mesh-profile local), the 2 s grace, one raft entry, and the new owner's
// first probe.
const failoverBound = 15 * time.Second

// workerView is one worker of GET /workers as the failover test reads it.
type workerView struct {
	URL             string     `json:"url"`
	Owner           string     `json:"owner"`
	Epoch           uint64     `json:"epoch"`
	Origin          string     `json:"origin"`
	HealthState     string     `json:"health_state"`
	LastHealthCheck *time.Time `json:"last_health_check"`
}

func workerOn(t *testing.T, g *clusterGW, u string) (workerView, bool) {
	t.Helper()
	var list struct {
		Workers []workerView `json:"workers"`
	}
	if !getJSON(t, g, "/workers", &list) {
		return workerView{}, false
	}
	for _, w := range list.Workers {
		if w.URL == u {
			return w, true
		}
	}
	return workerView{}, false
}

// TestFailoverKilledOwner: a worker registered on g2 is owned by g2; g2 is killed with SIGKILL;
// within the grace plus a bound the leader gives it to a live gateway at a higher epoch, the new
// owner probes it, and both survivors route to it.
func TestFailoverKilledOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	start := time.Now()
	b := harness.Build(t)
	engine := harness.StartEngine(t, b, "engine-failover")
	grace := []string{"--owner-failover-grace-secs", "2"}
	gws := []*clusterGW{newClusterGW(t, "f1", grace...), newClusterGW(t, "f2", grace...), newClusterGW(t, "f3", grace...)}
	gws[0].start(t, b)
	gws[1].start(t, b, gws[0].meshAddr())
	gws[2].start(t, b, gws[0].meshAddr())
	waitFormed(t, gws...)
	t.Logf("formed in %v", time.Since(start).Round(time.Millisecond))

	owner, rest := gws[1], []*clusterGW{gws[0], gws[2]}
	newAdmin(owner.Gateway, "").must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, engine.URL))
	var before workerView
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, g.id+" lists the worker owned by "+owner.id, func() bool {
			w, ok := workerOn(t, g, engine.URL)
			before = w
			return ok && w.Owner == owner.id
		})
	}

	owner.Kill()
	killedAt := time.Now()
	var after workerView
	for _, g := range rest {
		harness.WaitFor(t, failoverBound, g.id+" shows the worker owned by a survivor at a higher epoch", func() bool {
			w, ok := workerOn(t, g, engine.URL)
			after = w
			return ok && (w.Owner == rest[0].id || w.Owner == rest[1].id) && w.Epoch > before.Epoch
		})
	}
	t.Logf("failed over to %s (epoch %d -> %d) %v after the kill", after.Owner, before.Epoch, after.Epoch,
		time.Since(killedAt).Round(time.Millisecond))

	// The new owner probes it; both survivors route to it.
	newOwner := rest[0]
	if after.Owner == rest[1].id {
		newOwner = rest[1]
	}
	harness.WaitFor(t, failoverBound, newOwner.id+" probes the worker it now owns", func() bool {
		w, ok := workerOn(t, newOwner, engine.URL)
		return ok && w.Origin == "local" && w.LastHealthCheck != nil && w.HealthState == "ready"
	})
	client := &http.Client{Timeout: 5 * time.Second}
	for _, g := range rest {
		harness.WaitFor(t, failoverBound, g.id+" serves a chat through the failed-over worker", func() bool {
			code, _, err := chat(client, g.URL, "after failover via "+g.id)
			return err == nil && code == 200
		})
	}
	t.Logf("routable through both survivors %v after the kill; total %v",
		time.Since(killedAt).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
