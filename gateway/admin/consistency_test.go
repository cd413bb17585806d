package admin

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// cutOffWriter is a writer that finds itself cut off from the quorum (forward.Forwarder.CutOff).
type cutOffWriter struct {
	Writer
	err error
}

func (w cutOffWriter) CutOff() error { return w.err }

// A gateway cut off from the quorum (a region cut, found by the forwarder's probes) answers a
// write it would first judge through a read barrier (its copy lacks the worker), and a GET with
// ?consistent=true, with 503 no_leader saying it cannot reach a quorum, at once: the barrier would
// ask a leader it cannot reach and wait its 5 s.
func TestConsistencyBarrierWhenCutOff(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.register(t, fmt.Sprintf(`{"url":%q}`, workerURL(8204)))
	f := &fakeFleet{}
	nq := &consensus.NoQuorumError{Silence: 400 * time.Millisecond, Reached: 1, Voters: 3}
	h := e.handler(func(c *Config) {
		c.Records, c.Fleet = &lagRecords{Records: e.node}, f
		c.Writer = cutOffWriter{Writer: c.Writer, err: nq}
	})
	for _, r := range []req{
		{method: "PUT", uri: "/workers/" + url.PathEscape(rec.URL), body: `{"disabled":true}`},
		{method: "GET", uri: "/workers/" + url.PathEscape(rec.URL) + "?consistent=true"},
	} {
		a := do(h, r)
		if a.status != 503 || a.errCode() != codeNoLeader || !strings.Contains(string(a.body), "cannot reach a quorum") {
			t.Errorf("%s %s on a cut-off gateway: %d %s; want 503 no_leader saying it cannot reach a quorum", r.method, r.uri, a.status, a.body)
		}
	}
	if n := f.barriers.Load(); n != 0 {
		t.Errorf("%d read barriers asked of a leader the gateway cannot reach; want none", n)
	}
	if r, _ := e.node.Worker(idOf(t, rec.URL)); r.Disabled {
		t.Fatal("the write was applied")
	}
}

// waitingFleet's barrier waits for its context: a leader that does not answer.
type waitingFleet struct {
	fakeFleet
	started chan struct{}
}

func (f *waitingFleet) Barrier(ctx context.Context) error {
	f.barriers.Add(1)
	close(f.started)
	<-ctx.Done()
	return fmt.Errorf("%w: %w", consensus.ErrNoLeader, ctx.Err())
}

// flippingWriter is cut off once cut is set.
type flippingWriter struct {
	Writer
	cut *atomic.Bool
}

func (w flippingWriter) CutOff() error {
	if w.cut.Load() {
		return &consensus.NoQuorumError{Silence: 300 * time.Millisecond, Reached: 1, Voters: 3}
	}
	return nil
}

// A read barrier in progress when the gateway finds itself cut off ends then with 503
// no_leader saying it cannot reach a quorum, not after its 5 s bound.
func TestConsistencyBarrierCutOffWhileWaiting(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.register(t, fmt.Sprintf(`{"url":%q}`, workerURL(8205)))
	f := &waitingFleet{started: make(chan struct{})}
	var cut atomic.Bool
	h := e.handler(func(c *Config) {
		c.Records, c.Fleet = &lagRecords{Records: e.node}, f
		c.Writer = flippingWriter{Writer: c.Writer, cut: &cut}
	})
	go func() {
		<-f.started
		cut.Store(true)
	}()
	start := time.Now()
	a := do(h, req{method: "PUT", uri: "/workers/" + url.PathEscape(rec.URL), body: `{"disabled":true}`})
	took := time.Since(start)
	if a.status != 503 || a.errCode() != codeNoLeader || !strings.Contains(string(a.body), "cannot reach a quorum") {
		t.Fatalf("a write whose read barrier waited when the gateway was cut off: %d %s; want 503 no_leader saying it cannot reach a quorum", a.status, a.body)
	}
	if took > barrierBound/2 {
		t.Errorf("it answered after %v; want once the cut is found, not after the barrier's bound (%v)", took, barrierBound)
	}
}
