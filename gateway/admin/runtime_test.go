package admin

import (
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/fleet"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// fakeRuntime knows one owned worker.
type fakeRuntime struct {
	id worker.ID
	st owned.Status
}

func (f fakeRuntime) Status(id worker.ID) (owned.Status, bool) { return f.st, id == f.id }

// GET /workers shows the owner's runtime state of a worker: health counters, the last probe's
// error and status, and the breaker; a worker the runtime does not own shows none of it.
func TestRecordShowsRuntime(t *testing.T) {
	p, w := newPool(t)
	probed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rt := fakeRuntime{id: w.ID, st: owned.Status{
		Health: health.NotReady, ConsecutiveFailures: 3, LastError: "status 503", LastStatusCode: 503, LastProbe: probed,
		Breaker: breaker.Snapshot{State: breaker.Open, ConsecutiveFailures: 10},
	}}
	h := New(Config{Pool: p, NodeID: "n1", Status: func() any { return nil }, Logger: testkit.Quiet(), Runtime: rt})
	a := do(h, req{method: "GET", uri: "/workers/" + string(w.ID)})
	r := a.record(t)
	if r.ConsecutiveFailures != 3 || r.LastError != "status 503" || r.LastStatusCode != 503 ||
		r.LastHealthCheck == nil || !r.LastHealthCheck.Equal(probed) || r.Breaker == nil || r.Breaker.State != breaker.Open ||
		r.Breaker.ConsecutiveFailures != 10 {
		t.Errorf("record %+v", r)
	}
	if !strings.Contains(a.body, `"breaker":{"state":"open","consecutive_failures":10,"consecutive_successes":0}`) {
		t.Errorf("breaker JSON: %s", a.body)
	}
	h = New(Config{Pool: p, NodeID: "n1", Status: func() any { return nil }, Logger: testkit.Quiet(), Runtime: fakeRuntime{id: "w-other"}})
	a = do(h, req{method: "GET", uri: "/workers/" + string(w.ID)})
	if r := a.record(t); r.Breaker != nil || r.LastHealthCheck != nil || !strings.Contains(a.body, `"last_error":""`) {
		t.Errorf("a worker not owned shows runtime state: %s", a.body)
	}
}

// fakeImports knows one imported worker.
type fakeImports struct {
	id worker.ID
	st fleet.ImportedStatus
}

func (f fakeImports) Imported(id worker.ID) (fleet.ImportedStatus, bool) { return f.st, id == f.id }

// A worker another gateway owns shows its owner's state from the last bulletin, stale when it
// was not refreshed; before the first bulletin, health and breaker are unknown.
func TestRecordShowsImportedState(t *testing.T) {
	p := pool.New(pool.Config{StartPending: true})
	w, _, err := p.Upsert(worker.Spec{URL: "http://127.0.0.1:8001"}, pool.OriginMesh)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.SetOwner(w.ID, "n2", 7)
	received := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	im := fakeImports{id: w.ID, st: fleet.ImportedStatus{Received: received, Stale: true, Bulletin: mesh.Bulletin{
		Worker: string(w.ID), Owner: "n2", Epoch: 7, Health: health.NotReady, HealthFailures: 3, LastError: "status 503",
		LastStatusCode: 503, Breaker: breaker.Open, BreakerFailures: 10, BreakerReopenIn: time.Minute}}}
	h := New(Config{Pool: p, NodeID: "n1", Status: func() any { return nil }, Logger: testkit.Quiet(), Imports: im})
	a := do(h, req{method: "GET", uri: "/workers/" + string(w.ID)})
	r := a.record(t)
	if r.Origin != "mesh" || r.HealthState != "not_ready" || !r.Stale || r.ConsecutiveFailures != 3 || r.LastStatusCode != 503 ||
		r.Breaker == nil || r.Breaker.State != breaker.Open || !r.Breaker.ReopensAt.Equal(received.Add(time.Minute)) || r.Routable {
		t.Errorf("record %s", a.body)
	}
	owners := do(h, req{method: "GET", uri: "/mesh/owners"})
	if !strings.Contains(owners.body, `"health_state":"not_ready","breaker":"open"`) || !strings.Contains(owners.body, `"stale":true`) {
		t.Errorf("GET /mesh/owners: %s", owners.body)
	}

	h = New(Config{Pool: p, NodeID: "n1", Status: func() any { return nil }, Logger: testkit.Quiet(), Imports: fakeImports{id: "w-other"}})
	if r := do(h, req{method: "GET", uri: "/workers/" + string(w.ID)}).record(t); r.HealthState != HealthUnknown || r.Breaker != nil {
		t.Errorf("before the first bulletin: health %q breaker %+v; want unknown and none", r.HealthState, r.Breaker)
	}
	if o := do(h, req{method: "GET", uri: "/mesh/owners"}).body; !strings.Contains(o, `"health_state":"unknown","breaker":"unknown"`) {
		t.Errorf("GET /mesh/owners before the first bulletin: %s", o)
	}
}

// GET /workers on a gateway that does not own an ipc:// worker does not list it (it cannot
// reach it); its record is still there by id and in /mesh/owners.
func TestHostLocalWorkerListedOnlyByItsOwner(t *testing.T) {
	e := newEnv(t, nil)
	r := e.register(t, `{"url":"ipc:///tmp/engine.sock","owner":"n2"}`)
	e.register(t, `{"url":"http://127.0.0.1:8001","owner":"n2"}`)
	list := do(e.h, req{method: "GET", uri: "/workers"})
	if strings.Contains(list.body, "ipc://") || !strings.Contains(list.body, `"total":1`) {
		t.Errorf("GET /workers on a gateway that does not own the ipc:// worker: %s", list.body)
	}
	if a := do(e.h, req{method: "GET", uri: "/workers/" + r.ID}); a.status != 200 {
		t.Errorf("GET /workers/{id}: %d %s", a.status, a.body)
	}
	if o := do(e.h, req{method: "GET", uri: "/mesh/owners"}).body; !strings.Contains(o, "ipc://") {
		t.Errorf("GET /mesh/owners lost the ipc:// record: %s", o)
	}
	mine := e.handler(func(c *Config) { c.NodeID = "n2" })
	if l := do(mine, req{method: "GET", uri: "/workers"}).body; !strings.Contains(l, "ipc://") {
		t.Errorf("GET /workers on the owner does not list its ipc:// worker: %s", l)
	}
}
