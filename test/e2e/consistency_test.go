package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// threeGateways starts g1, g2 and g3 on loopback, g2 and g3 joining g1, and waits until they
// form one raft group of three voters.
func threeGateways(t *testing.T, b harness.Bins) []*clusterGW {
	t.Helper()
	// round_robin: a request reaches the target whenever it is routable (cache_aware, the
	// default, would keep a repeated chat on whichever engine served it first).
	rr := []string{"--policy", "round_robin"}
	gws := []*clusterGW{newClusterGW(t, "g1", rr...), newClusterGW(t, "g2", rr...), newClusterGW(t, "g3", rr...)}
	gws[0].start(t, b)
	gws[1].start(t, b, gws[0].meshAddr())
	gws[2].start(t, b, gws[0].meshAddr())
	waitFormed(t, gws...)
	return gws
}

// workerAnswer is the part of a record these tests read, with the fleet acknowledgement of a
// write's answer.
type workerAnswer struct {
	URL      string `json:"url"`
	Disabled bool   `json:"disabled"`
	Routable bool   `json:"routable"`
	FleetAck *struct {
		Acked   []string `json:"acked"`
		Lagging []string `json:"lagging"`
	} `json:"fleet_ack"`
}

// Read-your-writes across gateways: a registration on A is seen at once by a disable on B
// (no 404 worker_not_found), and a read on C right after shows the disable.
func TestConsistencyRegisterOnADisableOnBReadOnC(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	gws := threeGateways(t, b)
	a, bb, c := newAdmin(gws[0].Gateway, ""), newAdmin(gws[1].Gateway, ""), newAdmin(gws[2].Gateway, "")
	const trials = 40
	var notFound, stale int
	for i := range trials {
		// An address nothing listens on: the records are what is tested, not the engine.
		u := fmt.Sprintf("http://127.0.0.1:%d", 20000+i)
		a.must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, u))
		path := "/workers/" + url.PathEscape(u)
		code, body := bb.do(t, "PUT", path, `{"disabled":true,"reason":"consistency test"}`)
		switch code {
		case 200:
			var rec workerAnswer
			if err := json.Unmarshal([]byte(body), &rec); err != nil || rec.FleetAck == nil ||
				len(rec.FleetAck.Acked) != len(gws) || len(rec.FleetAck.Lagging) != 0 {
				t.Fatalf("trial %d: the disable's answer does not show all %d gateways acknowledging it: %.300s", i, len(gws), body)
			}
		case 404:
			notFound++
			t.Logf("trial %d: the disable on %s answered 404: %s", i, gws[1].id, body)
			continue
		default:
			t.Fatalf("trial %d: the disable on %s answered %d: %s", i, gws[1].id, code, body)
		}
		code, body = c.do(t, "GET", path, "")
		var rec workerAnswer
		if code != 200 || json.Unmarshal([]byte(body), &rec) != nil || !rec.Disabled {
			stale++
			t.Logf("trial %d: the read on %s answered %d: %.200s", i, gws[2].id, code, body)
		}
	}
	if notFound > 0 || stale > 0 {
		t.Fatalf("of %d trials: %d disables answered 404, %d reads did not show the disable", trials, notFound, stale)
	}
}

// After a disable returns, no gateway starts a request to the worker: 15 requests sent through
// C at once after a disable on B never reach the disabled engine.
func TestConsistencyDisableStopsTrafficEverywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	target := harness.StartEngine(t, b, "engine-target")
	other := harness.StartEngine(t, b, "engine-other")
	gws := threeGateways(t, b)
	a, bb, c := newAdmin(gws[0].Gateway, ""), newAdmin(gws[1].Gateway, ""), newAdmin(gws[2].Gateway, "")
	for _, e := range []*harness.Proc{target, other} {
		a.must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, e.URL))
	}
	path := "/workers/" + url.PathEscape(target.URL)
	client := &http.Client{Timeout: 10 * time.Second}
	// Both are routable on C (their owner's probes passed and its bulletins arrived), so that C
	// always has a worker to send to.
	for _, e := range []*harness.Proc{target, other} {
		harness.WaitFor(t, clusterBound, gws[2].id+" lists "+e.Name+" routable", func() bool {
			var rec workerAnswer
			code, body := c.do(t, "GET", "/workers/"+url.PathEscape(e.URL), "")
			return code == 200 && json.Unmarshal([]byte(body), &rec) == nil && rec.Routable
		})
	}
	const trials, requests = 10, 15
	var reached int64
	for i := range trials {
		bb.must(t, 200, "PUT", path, `{"disabled":false}`)
		// C routes to the target again: it is routable there and takes a request.
		harness.WaitFor(t, clusterBound, gws[2].id+" routes to the re-enabled target", func() bool {
			var rec workerAnswer
			code, body := c.do(t, "GET", path, "")
			if code != 200 || json.Unmarshal([]byte(body), &rec) != nil || !rec.Routable {
				return false
			}
			before, _ := engineStats(t, target, gws[2].id)
			code, _, err := chat(client, gws[2].URL, "warm up")
			after, _ := engineStats(t, target, gws[2].id)
			return err == nil && code == 200 && after > before
		})
		before, _ := engineStats(t, target, gws[2].id)
		bb.must(t, 200, "PUT", path, `{"disabled":true,"reason":"consistency test"}`)
		sendChats(t, gws[2].Gateway, requests, 200)
		after, _ := engineStats(t, target, gws[2].id)
		if after != before {
			t.Logf("trial %d: %d of %d requests through %s reached the disabled worker", i, after-before, requests, gws[2].id)
		}
		reached += after - before
	}
	if reached > 0 {
		t.Fatalf("%d requests of %d×%d reached the worker after its disable returned", reached, trials, requests)
	}
}
