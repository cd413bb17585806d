package outcome

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/worker"
)

// queued is one ReportQueue.Report call.
type queued struct {
	Owner, Worker string
	Epoch         uint64
	Outcome       Outcome
}

// fakeQueue records its Report calls.
type fakeQueue struct {
	mu  sync.Mutex
	got []queued
}

func (f *fakeQueue) Report(owner, w string, epoch uint64, o Outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, queued{owner, w, epoch, o})
}

// TestRouterRoute: an outcome is classified with the worker's own status lists and reported to
// its owner at the given epoch; outcomes that are nothing, and workers without an owner, report
// nothing.
func TestRouterRoute(t *testing.T) {
	tests := []struct {
		name       string
		owner      string
		resilience *worker.Resilience
		status     int
		connErr    bool
		want       Outcome // 0: nothing reported
	}{
		{"200 succeeds", "gw-b", nil, 200, false, Success},
		{"404 succeeds", "gw-b", nil, 404, false, Success},
		{"500 fails", "gw-b", nil, 500, false, Failure},
		{"502 fails", "gw-b", nil, 502, false, Failure},
		{"no answer fails", "gw-b", nil, 0, true, Failure},
		{"no answer with a status fails", "gw-b", nil, 200, true, Failure},
		{"no answer in time times out", "gw-b", nil, breaker.NoResponseInTime, true, TimedOut},
		{"429 is nothing", "gw-b", nil, 429, false, 0},
		{"own capacity list", "gw-b", &worker.Resilience{CapacityStatusCodes: []int{503}}, 503, false, 0},
		{"own retryable list", "gw-b", &worker.Resilience{RetryableStatusCodes: []int{502}}, 500, false, Success},
		{"own retryable list fails", "gw-b", &worker.Resilience{RetryableStatusCodes: []int{418}}, 418, false, Failure},
		{"own lists, no answer fails", "gw-b", &worker.Resilience{RetryableStatusCodes: []int{418}}, 0, true, Failure},
		{"no owner yet", "", nil, 500, false, 0},
		{"no owner yet, own lists", "", &worker.Resilience{RetryableStatusCodes: []int{418}}, 418, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &fakeQueue{}
			r := NewRouter(q)
			for range 2 { // the second time reads the cached classifier
				r.Route(tt.owner, "w1", 3, tt.resilience, tt.status, tt.connErr)
			}
			var want []queued
			if tt.want != 0 {
				want = []queued{{tt.owner, "w1", 3, tt.want}, {tt.owner, "w1", 3, tt.want}}
			}
			if diff := cmp.Diff(want, q.got); diff != "" {
				t.Errorf("reports (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRouterClassifierPerWorker: two workers' lists classify the same status apart through one
// Router's cache.
func TestRouterClassifierPerWorker(t *testing.T) {
	q := &fakeQueue{}
	r := NewRouter(q)
	fails := &worker.Resilience{RetryableStatusCodes: []int{418}}
	succeeds := &worker.Resilience{RetryableStatusCodes: []int{502}}
	for range 2 {
		r.Route("gw-b", "w1", 1, fails, 418, false)
		r.Route("gw-b", "w2", 1, succeeds, 418, false)
	}
	want := []queued{{"gw-b", "w1", 1, Failure}, {"gw-b", "w2", 1, Success}, {"gw-b", "w1", 1, Failure}, {"gw-b", "w2", 1, Success}}
	if diff := cmp.Diff(want, q.got); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
}

// TestRouterClassifierCacheIsBounded: a cache past maxCachedClassifiers entries is emptied.
func TestRouterClassifierCacheIsBounded(t *testing.T) {
	r := NewRouter(&fakeQueue{})
	for range maxCachedClassifiers + 10 {
		r.classifier(&worker.Resilience{})
	}
	n := 0
	r.classifiers.Range(func(any, any) bool { n++; return true })
	if n > maxCachedClassifiers {
		t.Errorf("%d cached classifiers, want at most %d", n, maxCachedClassifiers)
	}
	if n == 0 {
		t.Error("no cached classifier, want the ones stored since the cache was emptied")
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

// TestSinkTo: each run is recorded n times as its breaker.Outcome, and refused when the recorder
// does not own the worker at the run's epoch.
func TestSinkTo(t *testing.T) {
	rec := &fakeRemoteRecorder{}
	sink := SinkTo(rec)
	tests := []struct {
		name   string
		worker string
		epoch  uint64
		o      Outcome
		n      int
		want   bool
	}{
		{"failures", "w1", 2, Failure, 2, true},
		{"a success", "w1", 2, Success, 1, true},
		{"a timeout", "w1", 2, TimedOut, 1, true},
		{"another epoch", "w1", 3, Failure, 1, false},
		{"another worker", "w2", 2, Failure, 1, false},
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
