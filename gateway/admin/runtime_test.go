package admin

import (
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/health"
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
	h := New(Config{Pool: p, NodeID: "n1", Status: func() any { return nil }, Logger: quiet(), Runtime: rt})
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
	h = New(Config{Pool: p, NodeID: "n1", Status: func() any { return nil }, Logger: quiet(), Runtime: fakeRuntime{id: "w-other"}})
	a = do(h, req{method: "GET", uri: "/workers/" + string(w.ID)})
	if r := a.record(t); r.Breaker != nil || r.LastHealthCheck != nil || !strings.Contains(a.body, `"last_error":""`) {
		t.Errorf("a worker not owned shows runtime state: %s", a.body)
	}
}
