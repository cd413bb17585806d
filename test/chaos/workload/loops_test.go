package workload

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/meshgw/meshgw/test/chaos/history"
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
