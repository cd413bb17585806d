package admin

import (
	"encoding/json"
	"slices"
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

// rowOf is what GET /workers's record says of the fields a WorkerRow carries.
func rowOf(r Record) WorkerRow {
	row := WorkerRow{ID: r.ID, URL: r.URL, Owner: r.Owner, Region: r.Region, Models: r.Models, Health: r.HealthState,
		Breaker: BreakerUnknown, Disabled: r.Disabled, DisabledReason: r.DisabledReason, Dead: r.IsDead, Routable: r.Routable,
		Stale: r.Stale, Active: r.ActiveRequests, Transitions: r.Transitions}
	if len(row.Models) == 0 {
		row.Models = r.DiscoveredModels
	}
	if r.Breaker != nil {
		row.Breaker = r.Breaker.State.String()
	}
	if r.Cache != nil {
		row.PromptTokens, row.Cached = r.Cache.PromptTokens, r.Cache.CachedTokens
	}
	return row
}

// listRecords is GET /workers's list, as values.
func listRecords(t *testing.T, h *Handler) []Record {
	t.Helper()
	var list WorkerList
	a := do(h, req{method: "GET", uri: "/workers"})
	if a.status != 200 {
		t.Fatalf("GET /workers: %d %s", a.status, a.body)
	}
	if err := json.Unmarshal([]byte(a.body), &list); err != nil {
		t.Fatal(err)
	}
	return list.Workers
}

func sameRows(t *testing.T, name string, h *Handler) {
	t.Helper()
	recs := listRecords(t, h)
	rows := h.WorkerRows()
	if len(rows) != len(recs) {
		t.Fatalf("%s: %d rows, GET /workers lists %d", name, len(rows), len(recs))
	}
	slices.SortFunc(rows, func(a, b WorkerRow) int { return compareStr(a.ID, b.ID) })
	slices.SortFunc(recs, func(a, b Record) int { return compareStr(a.ID, b.ID) })
	for i := range rows {
		want, got := rowOf(recs[i]), rows[i]
		if len(got.Models) == 0 && len(want.Models) == 0 {
			got.Models, want.Models = nil, nil
		}
		if !sameTransitions(got.Transitions, want.Transitions) || !slices.Equal(got.Models, want.Models) {
			t.Errorf("%s: row %+v, GET /workers %+v", name, got, want)
		}
		got.Transitions, want.Transitions, got.Models, want.Models = nil, nil, nil, nil
		if !equalRow(got, want) {
			t.Errorf("%s: row %+v, GET /workers %+v", name, got, want)
		}
	}
}

func equalRow(a, b WorkerRow) bool {
	return a.ID == b.ID && a.URL == b.URL && a.Owner == b.Owner && a.Region == b.Region && a.Health == b.Health &&
		a.Breaker == b.Breaker && a.Disabled == b.Disabled && a.Dead == b.Dead && a.DisabledReason == b.DisabledReason &&
		a.Routable == b.Routable && a.Stale == b.Stale && a.Active == b.Active && a.PromptTokens == b.PromptTokens && a.Cached == b.Cached
}

func sameTransitions(a, b []owned.Transition) bool {
	return slices.EqualFunc(a, b, func(x, y owned.Transition) bool {
		return x.At.Equal(y.At) && x.Kind == y.Kind && x.From == y.From && x.To == y.To
	})
}

func compareStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestWorkerRowsMatchRecords: the console's rows say what GET /workers says, for raft records
// (registered, disabled, draining, host-local of another owner), owned workers with a runtime,
// and imported ones (stale, before the first bulletin).
func TestWorkerRowsMatchRecords(t *testing.T) {
	e := newEnv(t, nil)
	a := e.register(t, `{"url":"http://127.0.0.1:8001","model":"m1","region":"eu"}`)
	e.register(t, `{"url":"http://127.0.0.1:8002","models":["m2","m3"],"owner":"n2"}`)
	e.register(t, `{"url":"ipc:///tmp/engine.sock","owner":"n2"}`)
	c := e.register(t, `{"url":"http://127.0.0.1:8003"}`)
	if r := do(e.h, req{method: "PUT", uri: "/workers/" + a.ID, body: `{"disabled":true}`}); r.status != 200 {
		t.Fatalf("disable: %d %s", r.status, r.body)
	}
	testkit.For(t, "the pool to hold the three reachable workers", func() bool { return len(e.pool.Snapshot().All) >= 3 })
	sameRows(t, "raft records", e.h)

	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rt := fakeRuntime{id: worker.ID(c.ID), st: owned.Status{Health: health.Ready, Breaker: breaker.Snapshot{State: breaker.HalfOpen},
		Transitions: []owned.Transition{{At: at, Kind: "breaker", From: "open", To: "half_open"}}}}
	sameRows(t, "an owned worker with a runtime", e.handler(func(cfg *Config) { cfg.Runtime = rt }))

	p := pool.New(pool.Config{StartPending: true})
	w, _, err := p.Upsert(worker.Spec{URL: "http://127.0.0.1:8009"}, pool.OriginMesh)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.SetOwner(w.ID, "n2", 7)
	im := fakeImports{id: w.ID, st: fleet.ImportedStatus{Received: at, Stale: true, Bulletin: mesh.Bulletin{
		Worker: string(w.ID), Owner: "n2", Epoch: 7, Health: health.NotReady, Breaker: breaker.Open}}}
	base := Config{Pool: p, NodeID: "n1", Status: func() any { return nil }, Logger: testkit.Quiet()}
	withImports := base
	withImports.Imports = im
	sameRows(t, "imported, stale", New(withImports))
	sameRows(t, "imported, before the first bulletin", New(base))
}
