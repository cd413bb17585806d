package server

import (
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/fleet"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/worker"
)

// recordingOwner records the fleet reconciler's Own and Disown calls.
type recordingOwner struct {
	mu    sync.Mutex
	calls []string
}

func (o *recordingOwner) Own(s worker.Spec, epoch uint64, _ bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, "own "+string(s.ID())+" epoch "+itoa(epoch))
}

func (o *recordingOwner) Drain(s worker.Spec, epoch uint64, _ bool, _ time.Time, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, "drain "+string(s.ID())+" epoch "+itoa(epoch))
}

func (o *recordingOwner) Disown(id worker.ID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, "disown "+string(id))
}

func (o *recordingOwner) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.calls
	o.calls = nil
	return c
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// TestFailoverStartsHealthChecksOnTheNewOwner: once a Reassign entry names this gateway, its
// fleet reconciler Owns the worker (health checks start) with the new epoch, and the old
// owner's Disowns it.
func TestFailoverStartsHealthChecksOnTheNewOwner(t *testing.T) {
	f := fsm.New(slog.New(slog.DiscardHandler))
	apply := func(index uint64, c fsm.Command) fsm.Result {
		t.Helper()
		data, err := fsm.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		return f.Apply(&raft.Log{Index: index, Data: data}).(fsm.Result)
	}
	spec := worker.Spec{URL: "http://127.0.0.1:8100"}
	if err := spec.Normalize(); err != nil {
		t.Fatal(err)
	}
	id := spec.ID()
	apply(1, fsm.Register{Spec: spec, Owner: "g2"})
	reconcilers := map[string]*fleet.Reconciler{}
	calls := map[string]*recordingOwner{}
	for _, n := range []string{"g1", "g2"} {
		calls[n] = &recordingOwner{}
		reconcilers[n] = fleet.New(fleet.Config{NodeID: n, Records: f, Pool: pool.New(pool.Config{}),
			Owner: calls[n], Logger: slog.New(slog.DiscardHandler)})
		reconcilers[n].Reconcile()
	}
	if got := calls["g2"].take(); len(got) != 1 || got[0] != "own "+string(id)+" epoch 1" {
		t.Fatalf("g2 at registration: %v", got)
	}
	if got := calls["g1"].take(); len(got) != 0 {
		t.Fatalf("g1 at registration: %v", got)
	}
	res := apply(7, fsm.Reassign{Items: []fsm.ReassignItem{{ID: id, From: fsm.Fence{Owner: "g2", Epoch: 1}, To: "g1"}}})
	if res.Reassign == nil || len(res.Reassign.Moved) != 1 {
		t.Fatalf("reassign: %+v", res)
	}
	for _, r := range reconcilers {
		r.Reconcile()
	}
	if got := calls["g1"].take(); len(got) != 1 || got[0] != "own "+string(id)+" epoch 7" {
		t.Errorf("new owner g1: %v; want one Own at epoch 7", got)
	}
	if got := calls["g2"].take(); len(got) != 1 || got[0] != "disown "+string(id) {
		t.Errorf("old owner g2: %v; want one Disown", got)
	}

	// A DELETE's drain, then a failover back to g2 before g1 removed it: g2 finishes the drain.
	apply(8, fsm.Drain{ID: id, At: time.Unix(1, 0), Settle: time.Second})
	apply(9, fsm.Reassign{Items: []fsm.ReassignItem{{ID: id, From: fsm.Fence{Owner: "g1", Epoch: 7}, To: "g2"}}})
	for _, r := range reconcilers {
		r.Reconcile()
	}
	if got := calls["g2"].take(); len(got) != 1 || got[0] != "drain "+string(id)+" epoch 9" {
		t.Errorf("new owner g2 of a draining worker: %v; want one Drain at epoch 9", got)
	}
	if got := calls["g1"].take(); len(got) != 1 || got[0] != "disown "+string(id) {
		t.Errorf("old owner g1: %v; want one Disown", got)
	}
}
