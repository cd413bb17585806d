package workload

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/meshgw/meshgw/test/chaos/history"
)

// TestClassify: what the checker may assume of each answer. Only an answer that says nothing
// was written is failed; everything that may have reached raft without a verdict is unknown.
func TestClassify(t *testing.T) {
	dial := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	read := &net.OpError{Op: "read", Err: errors.New("connection reset")}
	tests := []struct {
		name   string
		kind   history.Kind
		status int
		code   string
		err    error
		want   history.Outcome
	}{
		{"dial error: nothing sent", history.Disable, 0, "", dial, history.Failed},
		{"reset after sending", history.Disable, 0, "", read, history.Unknown},
		{"timeout", history.Register, 0, "", errors.New("context deadline exceeded"), history.Unknown},
		{"outcome_unknown", history.Enable, 503, "outcome_unknown", nil, history.Unknown},
		{"no_leader: nothing written", history.Enable, 503, "no_leader", nil, history.Failed},
		{"write_timeout: nothing written", history.Enable, 503, "write_timeout", nil, history.Failed},
		{"internal error", history.Enable, 500, "internal", nil, history.Unknown},
		{"disabled", history.Disable, 200, "", nil, history.OK},
		{"registered", history.Register, 201, "", nil, history.OK},
		{"not found is an answer", history.Disable, 404, "worker_not_found", nil, history.OK},
		{"conflict", history.Register, 409, "worker_exists", nil, history.Failed},
		{"weight update failed: targets left disabled", history.WeightUpdate, 502, "weight_update_failed", nil, history.OK},
		{"weight update journal open", history.WeightUpdate, 409, "journal_unresolved", nil, history.Failed},
		{"weight update not started: it disabled and enabled again", history.WeightUpdate, 503, "fleet_ack_timeout", nil, history.OK},
		{"weight update not started, record left open: targets left disabled", history.WeightUpdate, 503, "journal_unresolved", nil, history.OK},
		{"weight update not started, closing it unknown", history.WeightUpdate, 503, "outcome_unknown", nil, history.Unknown},
		{"delete: draining", history.Delete, 202, "", nil, history.OK},
		{"delete: removed", history.Delete, 200, "", nil, history.OK},
		{"delete: gone", history.Delete, 404, "worker_not_found", nil, history.OK},
		{"delete: no leader", history.Delete, 503, "no_leader", nil, history.Failed},
		{"register while draining", history.Register, 409, "worker_exists", nil, history.Failed},
		{"rebalance", history.Rebalance, 200, "", nil, history.OK},
		{"rebalance: no leader", history.Rebalance, 503, "no_leader", nil, history.Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.kind, tt.status, tt.code, tt.err); got != tt.want {
				t.Errorf("classify(%s, %d, %q, %v) = %s, want %s", tt.kind, tt.status, tt.code, tt.err, got, tt.want)
			}
		})
	}
}

func TestNewWorkerID(t *testing.T) {
	// Two spellings of one engine are one worker, with meshgw's id.
	a, b := NewWorker("http://10.77.0.101:8000"), NewWorker("HTTP://10.77.0.101:8000/")
	if a.ID != b.ID || len(a.ID) != len("w-")+12 {
		t.Errorf("ids %q and %q", a.ID, b.ID)
	}
}

// A registration names the worker's region when it has one, and only then (the gateway's own
// region is the default).
func TestRegisterNamesTheRegion(t *testing.T) {
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		w.WriteHeader(201)
	}))
	defer srv.Close()
	a := &Admin{Rec: history.NewRecorder(), Client: srv.Client()}
	g := Gateway{ID: "n1", URL: srv.URL}
	eu := NewWorker("http://10.78.1.2:8000")
	eu.Region = "eu"
	a.Do(t.Context(), 1, history.Register, eu, g)
	a.Do(t.Context(), 1, history.Register, NewWorker("http://127.0.0.1:8000"), g)
	want := []string{`{"url":"http://10.78.1.2:8000","region":"eu"}`, `{"url":"http://127.0.0.1:8000"}`}
	if len(bodies) != 2 || bodies[0] != want[0] || bodies[1] != want[1] {
		t.Errorf("bodies %q; want %q", bodies, want)
	}
}
