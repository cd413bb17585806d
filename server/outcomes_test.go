package server

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/mesh/outcome"
	"github.com/meshgw/meshgw/worker"
)

// reportedOutcome is one Report call.
type reportedOutcome struct {
	Owner, Worker string
	Epoch         uint64
	Outcome       outcome.Outcome
}

type fakeOutcomeReporter struct {
	mu  sync.Mutex
	got []reportedOutcome
}

func (f *fakeOutcomeReporter) Report(owner, w string, epoch uint64, o outcome.Outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, reportedOutcome{owner, w, epoch, o})
}

// TestOutcomeReportsOnOutcome: the adapter routes a worker imported from another gateway with
// its owner, its record's epoch and its own status lists; it skips workers owned here, workers
// without an owner and a nil worker. The classification itself is tested in mesh/outcome.
func TestOutcomeReportsOnOutcome(t *testing.T) {
	tests := []struct {
		name       string
		origin     string
		owner      string
		resilience *worker.Resilience
		want       outcome.Outcome // 0: nothing reported
	}{
		{"imported", pool.OriginMesh, "gw-b", nil, outcome.Failure},
		{"imported, own lists", pool.OriginMesh, "gw-b", &worker.Resilience{RetryableStatusCodes: []int{502}}, outcome.Success},
		{"owned here", pool.OriginLocal, "gw-a", nil, 0},
		{"no owner yet", pool.OriginMesh, "", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pool.New(pool.Config{})
			w, _, err := p.Upsert(worker.Spec{URL: "http://127.0.0.1:9000", Resilience: tt.resilience}, tt.origin)
			if err != nil {
				t.Fatal(err)
			}
			if tt.owner != "" {
				if err := p.SetOwner(w.ID, tt.owner, 3); err != nil {
					t.Fatal(err)
				}
			}
			rep := &fakeOutcomeReporter{}
			o := &outcomeReports{router: outcome.NewRouter(rep)}
			o.onOutcome(p.Get(w.ID), 500, false)
			var want []reportedOutcome
			if tt.want != 0 {
				want = []reportedOutcome{{tt.owner, string(w.ID), 3, tt.want}}
			}
			if diff := cmp.Diff(want, rep.got); diff != "" {
				t.Errorf("reports (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("nil worker", func(t *testing.T) {
		rep := &fakeOutcomeReporter{}
		(&outcomeReports{router: outcome.NewRouter(rep)}).onOutcome(nil, 500, false)
		if len(rep.got) != 0 {
			t.Errorf("reports %v, want none", rep.got)
		}
	})
}

// TestOutcomeReportsEndToEnd: gateway gw-b proxies to a worker gw-a owns; the outcomes, a
// failure and a timeout, reach gw-a's recorder over gRPC on 127.0.0.1, and close lets gw-a's
// server stop gracefully.
func TestOutcomeReportsEndToEnd(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &chanRemoteRecorder{got: make(chan string, 4)}
	a, err := newOutcomeReports("gw-a", func(string) (string, bool) { return "", false }, nil, rec,
		prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	a.service.Register(srv)
	served := make(chan struct{})
	go func() { _ = srv.Serve(lis); close(served) }()
	b, err := newOutcomeReports("gw-b", func(id string) (string, bool) { return lis.Addr().String(), id == "gw-a" },
		nil, &chanRemoteRecorder{got: make(chan string, 4)}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}

	p := pool.New(pool.Config{})
	w, _, err := p.Upsert(worker.Spec{URL: "http://127.0.0.1:9000"}, pool.OriginMesh)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetOwner(w.ID, "gw-a", 2); err != nil {
		t.Fatal(err)
	}
	b.onOutcome(p.Get(w.ID), 502, false)
	b.onOutcome(p.Get(w.ID), breaker.NoResponseInTime, true)
	for _, want := range []string{" 2 failure 1", " 2 timed_out 1"} {
		select {
		case got := <-rec.got:
			if want = string(w.ID) + want; got != want {
				t.Errorf("recorded %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the outcome did not reach the owner within 10 s")
		}
	}
	b.close()
	a.close()
	srv.GracefulStop()
	<-served
}

// chanRemoteRecorder sends each RecordRemote call on got, accepting all.
type chanRemoteRecorder struct{ got chan string }

func (r *chanRemoteRecorder) RecordRemote(id worker.ID, epoch uint64, o breaker.Outcome, n int) bool {
	r.got <- fmt.Sprintf("%s %d %s %d", id, epoch, o, n)
	return true
}
