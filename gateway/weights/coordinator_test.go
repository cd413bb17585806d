package weights

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// fsmWriter applies commands to an FSM at once, as a one-node raft would.
type fsmWriter struct {
	mu  sync.Mutex
	f   *fsm.FSM
	idx uint64
}

func (w *fsmWriter) Apply(_ context.Context, cmd fsm.Command) (fsm.Result, error) {
	data, err := fsm.Encode(cmd)
	if err != nil {
		return fsm.Result{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.idx++
	return w.f.Apply(&raft.Log{Index: w.idx, Type: raft.LogCommand, Data: data}).(fsm.Result), nil
}

type ackAll struct{ lagging []string }

func (a ackAll) Acknowledge(_ context.Context, index uint64) fleetack.Report {
	return fleetack.Report{Index: index, Acked: []string{"n1"}, Lagging: a.lagging}
}

// engines serves /update_weights_from_disk for each url; fail names the ones that answer 500.
func engines(t *testing.T, n int, fail map[int]bool) ([]string, *sync.Map) {
	t.Helper()
	var seen sync.Map
	var urls []string
	for i := range n {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			seen.Store(i, string(body))
			if fail[i] {
				w.WriteHeader(500)
				_, _ = w.Write([]byte(`{"success": false, "message": "out of memory"}`))
				return
			}
			_, _ = w.Write([]byte(`{"success": true, "message": "Succeeded to update model weights."}`))
		}))
		t.Cleanup(s.Close)
		urls = append(urls, s.URL)
	}
	return urls, &seen
}

func setup(t *testing.T, urls []string, lagging []string) (*Coordinator, *fsmWriter, []worker.ID) {
	t.Helper()
	w := &fsmWriter{f: fsm.New(testkit.Quiet())}
	var ids []worker.ID
	for _, u := range urls {
		s := worker.Spec{URL: u, Model: "m1"}
		if err := s.Normalize(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID())
		if _, err := w.Apply(context.Background(), fsm.Register{Spec: s, Owner: "n1", At: time.Unix(1, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	c := New(Config{NodeID: "n1", Writer: w, Records: w.f, Fleet: ackAll{lagging}, Send: HTTPSender{NodeID: "n1"}, Logger: testkit.Quiet()})
	return c, w, ids
}

// Every target gets the body unchanged, and a full success leaves every target enabled and no
// record open.
func TestUpdateSuccess(t *testing.T) {
	urls, seen := engines(t, 3, nil)
	c, w, ids := setup(t, urls, nil)
	body := `{"model_path": "/models/v2", "weight_version": "v2"}`
	rep, err := c.Update(context.Background(), []byte(body), Target{})
	if err != nil || !rep.Success || rep.Result != "ok" || len(rep.Targets) != 3 {
		t.Fatalf("update: %+v, %v", rep, err)
	}
	for i := range urls {
		if got, _ := seen.Load(i); got != body {
			t.Fatalf("engine %d got %q", i, got)
		}
	}
	for _, id := range ids {
		if r, _ := w.f.Worker(id); r.Disabled {
			t.Fatalf("%s stayed disabled", id)
		}
	}
	if j := w.f.Journal(); len(j) != 0 {
		t.Fatalf("a record stayed open: %+v", j)
	}
}

// A failed target leaves the record open with every target disabled; the next update is
// refused with a conflict naming the record.
func TestUpdateFailureKeepsRecord(t *testing.T) {
	urls, _ := engines(t, 3, map[int]bool{1: true})
	c, w, ids := setup(t, urls, nil)
	rep, err := c.Update(context.Background(), []byte(`{"model_path": "/m"}`), Target{})
	if err != nil || rep.Success || rep.Result != "failed" {
		t.Fatalf("update: %+v, %v", rep, err)
	}
	j := w.f.Journal()
	if len(j) != 1 || j[0].ID != rep.ID {
		t.Fatalf("journal: %+v", j)
	}
	failed := 0
	for _, id := range ids {
		if r, _ := w.f.Worker(id); !r.Disabled {
			t.Fatalf("%s enabled while the record is open", id)
		}
		if j[0].Outcomes[id] == fsm.OutcomeFailed {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("outcomes %v, want one failed", j[0].Outcomes)
	}
	_, err = c.Update(context.Background(), []byte(`{"model_path": "/m"}`), Target{IDs: ids[:1]})
	if !errors.Is(err, fsm.ErrConflict) {
		t.Fatalf("second update: %v, want a conflict", err)
	}
}

// An update that ended with a target not updated reads failed once it answers, and the watcher
// leaves it so: its coordinator did not restart, so it is not interrupted. Nor does the
// coordinator's later departure make it coordinator_lost: how it ended is known.
func TestFailedUpdateIsMarkedFailed(t *testing.T) {
	urls, _ := engines(t, 2, map[int]bool{0: true})
	c, w, ids := setup(t, urls, nil)
	rep, err := c.Update(context.Background(), []byte(`{"model_path": "/m"}`), Target{})
	if err != nil || rep.Result != "failed" {
		t.Fatalf("update: %+v, %v", rep, err)
	}
	if j := w.f.Journal(); len(j) != 1 || j[0].State() != fsm.JournalFailed {
		t.Fatalf("after the answer: %+v, want state %s", j, fsm.JournalFailed)
	}
	c.WatchOnce(members{{ID: "n1", Status: mesh.StatusAlive}}, leading(true))
	if j := w.f.Journal(); len(j) != 1 || j[0].State() != fsm.JournalFailed {
		t.Fatalf("after its coordinator's watcher: %+v, want state %s", j, fsm.JournalFailed)
	}
	// Another gateway's failed record, its coordinator gone: the leader leaves the status.
	for _, cmd := range []fsm.Command{fsm.JournalResolve{ID: rep.ID, Action: fsm.ResolveAcknowledge},
		fsm.JournalOpen{ID: "u2", Coordinator: "n2", Targets: ids, At: time.Unix(3, 0)},
		fsm.JournalResolve{ID: "u2", Action: fsm.ResolveOutcome, Target: ids[0], Outcome: fsm.OutcomeFailed},
		fsm.JournalResolve{ID: "u2", Action: fsm.ResolveOutcome, Target: ids[1], Outcome: fsm.OutcomeUpdated}} {
		if res, err := w.Apply(context.Background(), cmd); err != nil || res.Err != nil {
			t.Fatalf("%+v: %v %v", cmd, err, res.Err)
		}
	}
	c.WatchOnce(members{{ID: "n2", Status: mesh.StatusLeft}}, leading(true))
	if j := w.f.Journal(); len(j) != 1 || j[0].State() != fsm.JournalFailed {
		t.Fatalf("after the leader's watcher: %+v, want state %s", j, fsm.JournalFailed)
	}
}

// While a record is open, a second update is refused with a conflict naming that record, even
// when the open record's disabled targets leave no enabled worker to pick, and nothing is sent.
func TestUpdateWhileRecordOpenNamesTheRecord(t *testing.T) {
	urls, seen := engines(t, 3, map[int]bool{1: true})
	c, w, ids := setup(t, urls, nil)
	first, err := c.Update(context.Background(), []byte(`{"model_path": "/m"}`), Target{})
	if err != nil || first.Result != "failed" {
		t.Fatalf("first update: %+v, %v", first, err)
	}
	for i := range urls {
		seen.Delete(i)
	}
	for _, tg := range []Target{{}, {Model: "m1"}, {IDs: ids[:1]}} {
		_, err := c.Update(context.Background(), []byte(`{"model_path": "/m2"}`), tg)
		var ce *fsm.ConflictError
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, first.ID) {
			t.Fatalf("update of %+v while %s is open: %v, want a conflict naming it", tg, first.ID, err)
		}
	}
	for i := range urls {
		if _, ok := seen.Load(i); ok {
			t.Fatalf("engine %d got an update while a record was open", i)
		}
	}
	if j := w.f.Journal(); len(j) != 1 || j[0].ID != first.ID {
		t.Fatalf("journal: %+v", j)
	}
}

// An update whose disable some gateway did not apply in time sends nothing and re-enables.
func TestUpdateFailsClosed(t *testing.T) {
	urls, seen := engines(t, 2, nil)
	c, w, ids := setup(t, urls, []string{"n3"})
	rep, err := c.Update(context.Background(), []byte(`{"model_path": "/m"}`), Target{Model: "m1"})
	if err != nil || rep.Result != "not_started" {
		t.Fatalf("update: %+v, %v", rep, err)
	}
	if _, ok := seen.Load(0); ok {
		t.Fatal("an engine got the update although the fleet did not acknowledge the disable")
	}
	if r, _ := w.f.Worker(ids[0]); r.Disabled || len(w.f.Journal()) != 0 {
		t.Fatal("not started, yet a target stayed disabled or the record open")
	}
}

// Targets that are not registered HTTP engines are refused before anything is written.
func TestUpdateBadTargets(t *testing.T) {
	urls, _ := engines(t, 1, nil)
	c, w, _ := setup(t, urls, nil)
	for _, tg := range []Target{{Model: "nope"}, {IDs: []worker.ID{"http://10.9.9.9:1"}}} {
		var ie *InputError
		if _, err := c.Update(context.Background(), []byte(`{}`), tg); !errors.As(err, &ie) {
			t.Fatalf("%+v: %v, want an input error", tg, err)
		}
	}
	if len(w.f.Journal()) != 0 {
		t.Fatal("a refused update opened a record")
	}
}

type members []mesh.Member

func (m members) Members() []mesh.Member { return m }

type leading bool

func (l leading) IsLeader() bool { return bool(l) }

// A record whose coordinator restarted is marked interrupted by that coordinator; one whose
// coordinator is gone is marked coordinator_lost by the leader. Both stay open.
func TestWatchMarksUnfinishedRecords(t *testing.T) {
	urls, _ := engines(t, 2, nil)
	c, w, ids := setup(t, urls, nil)
	if _, err := w.Apply(context.Background(), fsm.JournalOpen{ID: "u1", Coordinator: "n1", Targets: ids, At: time.Unix(2, 0)}); err != nil {
		t.Fatal(err)
	}
	c.WatchOnce(members{{ID: "n1", Status: mesh.StatusAlive}}, leading(false))
	if j := w.f.Journal(); len(j) != 1 || j[0].Status != fsm.JournalInterrupted {
		t.Fatalf("after the coordinator's restart: %+v", j)
	}
	if _, err := w.Apply(context.Background(), fsm.JournalResolve{ID: "u1", Action: fsm.ResolveAcknowledge}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Apply(context.Background(), fsm.JournalOpen{ID: "u2", Coordinator: "n2", Targets: ids, At: time.Unix(3, 0)}); err != nil {
		t.Fatal(err)
	}
	c.WatchOnce(members{{ID: "n2", Status: mesh.StatusAlive}}, leading(true))
	if j := w.f.Journal(); j[0].Status != fsm.JournalRunning {
		t.Fatalf("a live coordinator's record was marked: %+v", j)
	}
	c.WatchOnce(members{{ID: "n2", Status: mesh.StatusDead}}, leading(false))
	if j := w.f.Journal(); j[0].Status != fsm.JournalRunning {
		t.Fatalf("a follower marked a record: %+v", j)
	}
	c.WatchOnce(members{{ID: "n2", Status: mesh.StatusDead}}, leading(true))
	if j := w.f.Journal(); len(j) != 1 || j[0].Status != fsm.JournalCoordinatorLost {
		t.Fatalf("after the coordinator died: %+v", j)
	}
}

// An engine that does not answer within the per-target timeout ends unknown (it may hold either
// version); the record stays open, and the engines that answered are recorded updated.
func TestUpdateHangIsUnknown(t *testing.T) {
	hang := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client hanging up
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer s.Close()
	defer close(hang) // before the Close, which waits for the handler
	urls, _ := engines(t, 1, nil)
	c, w, ids := setup(t, append(urls, s.URL), nil)
	c.cfg.TargetTimeout = 100 * time.Millisecond
	rep, err := c.Update(context.Background(), []byte(`{"model_path": "/m"}`), Target{})
	if err != nil || rep.Result != "failed" {
		t.Fatalf("update: %+v, %v", rep, err)
	}
	j := w.f.Journal()
	if len(j) != 1 || j[0].Outcomes[ids[0]] != fsm.OutcomeUpdated || j[0].Outcomes[ids[1]] != fsm.OutcomeUnknown {
		t.Fatalf("journal: %+v", j)
	}
}
