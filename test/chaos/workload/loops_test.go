package workload

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/chaos/history"
	"github.com/meshgw/meshgw/test/testkit"
)

// TestRequestsEndWithTheRun: a request the run's own end cuts short (the workload's context
// cancelled while the gateway is still answering) is no outcome of the system, so it is not
// recorded as lost; the requests before it are recorded as they went.
func TestRequestsEndWithTheRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served, cut := 0, make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		if served == 1 {
			w.Header().Set("X-Mesh-Worker", "w-1")
			_, _ = w.Write([]byte(`{"object":"chat.completion"}`))
			return
		}
		w.Header().Set("X-Mesh-Worker", "w-1")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		cancel() // the run ends while this answer streams
		<-r.Context().Done()
		close(cut)
	}))
	defer srv.Close()
	rec := history.NewRecorder()
	Requests(ctx, rec, Gateway{ID: "n1", URL: srv.URL}, false)
	<-cut
	_, counts := rec.Counts()
	if counts[history.Served] != 1 || counts[history.GatewayLost] != 0 {
		t.Fatalf("recorded %v, want the one served request and no lost one", counts)
	}
}

// TestSampleEndsWithOwners: the run's end may come right after a round of probe counts. A
// gateway that applied a move to itself and probed at once shows the probe there, and only an
// ownership sample taken after it can show that it owned the worker: without one, the checker
// judged the probe by the gateway's older sample and called it a probe without ownership (the
// chaos short mode failed so once, seed 7, in its last second). So Sample ends with a round of
// ownership samples after its last probe counts.
func TestSampleEndsWithOwners(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"owners":[{"worker":"w-1","owner":"n1","epoch":1}]}`))
	}))
	defer gw.Close()
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"by_gateway":{"n1":{"probes":3}}}`))
	}))
	defer engine.Close()
	rec := history.NewRecorder()
	go func() { // the run ends right after the first round of probe counts
		if err := testkit.Until(ctx, testkit.Deadline, "a probe sample", func() bool { return len(rec.Snapshot().Probes) > 0 }); err != nil {
			t.Error(err)
		}
		cancel()
	}()
	Sample(ctx, rec, "", []Gateway{{ID: "n1", URL: gw.URL}}, map[string]string{"w-1": engine.URL}, time.Hour)
	h := rec.Snapshot()
	if len(h.Probes) == 0 || len(h.Owners) == 0 {
		t.Fatalf("recorded %d probe and %d ownership samples, want both", len(h.Probes), len(h.Owners))
	}
	lastProbe, lastOwners := h.Probes[len(h.Probes)-1].At, h.Owners[len(h.Owners)-1].At
	if lastOwners < lastProbe {
		t.Fatalf("the last ownership sample (%v) came before the last probe counts (%v); want one after", lastOwners, lastProbe)
	}
}
