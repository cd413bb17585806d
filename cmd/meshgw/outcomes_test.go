package main

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

// TestOutcomeRouter: an imported worker's outcome is classified with its own status lists and
// reported to its owner at its record's epoch; owned workers, workers without an owner and
// outcomes that are nothing are not reported.
func TestOutcomeRouter(t *testing.T) {
	tests := []struct {
		name       string
		origin     string
		owner      string
		resilience *worker.Resilience
		status     int
		connErr    bool
		want       outcome.Outcome // 0: nothing reported
	}{
		{"200 succeeds", pool.OriginMesh, "gw-b", nil, 200, false, outcome.Success},
		{"404 succeeds", pool.OriginMesh, "gw-b", nil, 404, false, outcome.Success},
		{"500 fails", pool.OriginMesh, "gw-b", nil, 500, false, outcome.Failure},
		{"no answer fails", pool.OriginMesh, "gw-b", nil, 0, true, outcome.Failure},
		{"no answer in time times out", pool.OriginMesh, "gw-b", nil, breaker.NoResponseInTime, true, outcome.TimedOut},
		{"429 is nothing", pool.OriginMesh, "gw-b", nil, 429, false, 0},
		{"own capacity list", pool.OriginMesh, "gw-b", &worker.Resilience{CapacityStatusCodes: []int{503}}, 503, false, 0},
		{"own retryable list", pool.OriginMesh, "gw-b", &worker.Resilience{RetryableStatusCodes: []int{502}}, 500, false, outcome.Success},
		{"own retryable list fails", pool.OriginMesh, "gw-b", &worker.Resilience{RetryableStatusCodes: []int{418}}, 418, false, outcome.Failure},
		{"owned here", pool.OriginLocal, "gw-a", nil, 500, false, 0},
		{"no owner yet", pool.OriginMesh, "", nil, 500, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pool.New(pool.Config{})
			spec := worker.Spec{URL: "http://127.0.0.1:9000", Resilience: tt.resilience}
			w, _, err := p.Upsert(spec, tt.origin)
			if err != nil {
				t.Fatal(err)
			}
			if tt.owner != "" {
				if err := p.SetOwner(w.ID, tt.owner, 3); err != nil {
					t.Fatal(err)
				}
			}
			w = p.Get(w.ID)
			rep := &fakeOutcomeReporter{}
			r := newOutcomeRouter(rep)
			for range 2 { // the second time reads the cached classifier
				r.OnOutcome(w, tt.status, tt.connErr)
			}
			var want []reportedOutcome
			if tt.want != 0 {
				want = []reportedOutcome{{tt.owner, string(w.ID), 3, tt.want}, {tt.owner, string(w.ID), 3, tt.want}}
			}
			if diff := cmp.Diff(want, rep.got); diff != "" {
				t.Errorf("reports (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeRemoteRecorder is a fake owned-worker manager that owns w1 at epoch 2.
type fakeRemoteRecorder struct{ got []string }

func (r *fakeRemoteRecorder) RecordRemote(id worker.ID, epoch uint64, o breaker.Outcome, n int) bool {
	if id != "w1" || epoch != 2 {
		return false
	}
	for range n {
		r.got = append(r.got, o.String())
	}
	return true
}

func TestOutcomeSink(t *testing.T) {
	rec := &fakeRemoteRecorder{}
	sink := outcomeSink(rec)
	tests := []struct {
		name   string
		worker string
		epoch  uint64
		o      outcome.Outcome
		n      int
		want   bool
	}{
		{"failures", "w1", 2, outcome.Failure, 2, true},
		{"a success", "w1", 2, outcome.Success, 1, true},
		{"a timeout", "w1", 2, outcome.TimedOut, 1, true},
		{"another epoch", "w1", 3, outcome.Failure, 1, false},
		{"another worker", "w2", 2, outcome.Failure, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sink("gw-b", tt.worker, tt.epoch, tt.o, tt.n); got != tt.want {
				t.Errorf("sink = %v, want %v", got, tt.want)
			}
		})
	}
	if diff := cmp.Diff([]string{"failure", "failure", "success", "timed_out"}, rec.got); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}
}

func TestClassifierCacheIsBounded(t *testing.T) {
	r := newOutcomeRouter(&fakeOutcomeReporter{})
	for range maxCachedClassifiers + 10 {
		r.classifier(&worker.Resilience{})
	}
	n := 0
	r.classifiers.Range(func(any, any) bool { n++; return true })
	if n > maxCachedClassifiers {
		t.Errorf("%d cached classifiers, want at most %d", n, maxCachedClassifiers)
	}
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
		nil, &fakeRemoteRecorder{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
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
	b.router.OnOutcome(p.Get(w.ID), 502, false)
	b.router.OnOutcome(p.Get(w.ID), breaker.NoResponseInTime, true)
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
