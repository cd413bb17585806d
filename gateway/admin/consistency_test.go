package admin

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

// fakeFleet counts barriers and acknowledgements; a barrier makes lag current.
type fakeFleet struct {
	barriers   atomic.Int64
	barrierErr error
	lag        *lagRecords

	mu    sync.Mutex
	acked []uint64
}

func (f *fakeFleet) Barrier(context.Context) error {
	f.barriers.Add(1)
	if f.barrierErr != nil {
		return f.barrierErr
	}
	if f.lag != nil {
		f.lag.current.Store(true)
	}
	return nil
}

func (f *fakeFleet) Acknowledge(_ context.Context, index uint64) fleetack.Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acked = append(f.acked, index)
	return fleetack.Report{Index: index, Acked: []string{"n1"}, Lagging: []string{"n2"}}
}

// lagRecords is a follower's copy that lacks every record until a barrier made it current.
type lagRecords struct {
	Records
	current atomic.Bool
}

func (l *lagRecords) Worker(id worker.ID) (fsm.Record, bool) {
	if !l.current.Load() {
		return fsm.Record{}, false
	}
	return l.Records.Worker(id)
}

func (l *lagRecords) Workers() []fsm.Record {
	if !l.current.Load() {
		return nil
	}
	return l.Records.Workers()
}

// A write is judged against the leader's state (after a read barrier), not the local copy, and
// answers the fleet's acknowledgement; a GET runs the barrier only with ?consistent=true.
func TestConsistencyBarrierAndAcks(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.register(t, fmt.Sprintf(`{"url":%q}`, workerURL(8201)))
	path := "/workers/" + url.PathEscape(rec.URL)

	// Without a Fleet, a lagging copy answers 404 for a record the leader holds.
	lagging := e.handler(func(c *Config) { c.Records = &lagRecords{Records: e.node} })
	if a := do(lagging, req{method: "PUT", uri: path, body: `{"disabled":true}`}); a.status != 404 {
		t.Fatalf("without a barrier: %d %s, want 404", a.status, a.body)
	}

	lag := &lagRecords{Records: e.node}
	f := &fakeFleet{lag: lag}
	h := e.handler(func(c *Config) { c.Records, c.Fleet = lag, f })
	a := do(h, req{method: "PUT", uri: path, body: `{"disabled":true}`})
	if a.status != 200 {
		t.Fatalf("with a barrier: %d %s", a.status, a.body)
	}
	got := a.record(t)
	if got.FleetAck == nil || got.FleetAck.Index == 0 {
		t.Fatalf("the answer has no fleet_ack: %s", a.body)
	}
	if diff := cmp.Diff(&fleetack.Report{Index: got.FleetAck.Index, Acked: []string{"n1"}, Lagging: []string{"n2"}}, got.FleetAck); diff != "" {
		t.Errorf("fleet_ack (-want +got):\n%s", diff)
	}

	tests := []struct {
		name           string
		r              req
		status         int
		barriers, acks int
	}{
		{"a plain GET reads local state", req{method: "GET", uri: "/workers"}, 200, 0, 0},
		{"GET ?consistent=true", req{method: "GET", uri: "/workers?consistent=true"}, 200, 1, 0},
		{"GET one worker ?consistent=1", req{method: "GET", uri: path + "?consistent=1"}, 200, 1, 0},
		{"GET /mesh/owners ?consistent=true", req{method: "GET", uri: "/mesh/owners?consistent=true"}, 200, 1, 0},
		{"GET ?consistent=false", req{method: "GET", uri: "/workers?consistent=false"}, 200, 0, 0},
		{"a bad consistent", req{method: "GET", uri: "/workers?consistent=maybe"}, 400, 0, 0},
		{"a registration is judged by the leader's FSM", req{method: "POST", uri: "/workers", body: fmt.Sprintf(`{"url":%q}`, workerURL(8202))}, 201, 0, 1},
		{"PATCH of a record the local copy lacks", req{method: "PATCH", uri: path, body: `{"priority":7}`}, 200, 1, 1},
		{"a PUT the local copy resolves: the leader's FSM judges it", req{method: "PUT", uri: path, body: `{"disabled":false}`}, 200, 0, 1},
		{"DELETE", req{method: "DELETE", uri: path}, 200, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lag.current.Store(strings.HasPrefix(tt.name, "a PUT the local copy resolves"))
			f := &fakeFleet{lag: lag}
			h := e.handler(func(c *Config) { c.Records, c.Fleet = lag, f })
			a := do(h, tt.r)
			if a.status != tt.status {
				t.Fatalf("%s %s: %d %s, want %d", tt.r.method, tt.r.uri, a.status, a.body, tt.status)
			}
			if got := f.barriers.Load(); got != int64(tt.barriers) {
				t.Errorf("barriers = %d, want %d", got, tt.barriers)
			}
			if got := len(f.acked); got != tt.acks {
				t.Errorf("acknowledgements = %d, want %d", got, tt.acks)
			}
		})
	}
}

// A write this gateway cannot judge from its copy, when the barrier finds no leader, is
// refused: nothing is written.
func TestConsistencyBarrierWithoutLeader(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.register(t, fmt.Sprintf(`{"url":%q}`, workerURL(8203)))
	f := &fakeFleet{barrierErr: consensus.ErrNoLeader}
	h := e.handler(func(c *Config) { c.Records, c.Fleet = &lagRecords{Records: e.node}, f })
	a := do(h, req{method: "PUT", uri: "/workers/" + url.PathEscape(rec.URL), body: `{"disabled":true}`})
	if a.status != 503 || a.errCode() != codeNoLeader {
		t.Fatalf("%d %s, want 503 no_leader", a.status, a.body)
	}
	if r, _ := e.node.Worker(idOf(t, rec.URL)); r.Disabled {
		t.Fatal("the write was applied")
	}
}
