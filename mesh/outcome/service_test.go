package outcome

import (
	"net"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
	"github.com/meshgw/meshgw/test/testkit"
)

func TestServiceRefusesMalformedRuns(t *testing.T) {
	tests := []struct {
		name string
		run  *meshv1.OutcomeRun
		want bool
	}{
		{"success", &meshv1.OutcomeRun{WorkerId: "w", Epoch: 1, Outcome: meshv1.Outcome_OUTCOME_SUCCESS, Count: 1}, true},
		{"failure at the largest count", &meshv1.OutcomeRun{WorkerId: "w", Outcome: meshv1.Outcome_OUTCOME_FAILURE, Count: MaxRunCount}, true},
		{"no worker", &meshv1.OutcomeRun{Outcome: meshv1.Outcome_OUTCOME_SUCCESS, Count: 1}, false},
		{"unspecified outcome", &meshv1.OutcomeRun{WorkerId: "w", Count: 1}, false},
		{"unknown outcome", &meshv1.OutcomeRun{WorkerId: "w", Outcome: 9, Count: 1}, false},
		{"count 0", &meshv1.OutcomeRun{WorkerId: "w", Outcome: meshv1.Outcome_OUTCOME_SUCCESS}, false},
		{"count too large", &meshv1.OutcomeRun{WorkerId: "w", Outcome: meshv1.Outcome_OUTCOME_FAILURE, Count: MaxRunCount + 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			s, err := NewService(ServiceOptions{Logger: quiet, Sink: func(string, string, uint64, Outcome, int) bool {
				called = true
				return true
			}})
			if err != nil {
				t.Fatal(err)
			}
			var ack meshv1.OutcomeAck
			s.apply(&meshv1.OutcomeBatch{From: "p", Runs: []*meshv1.OutcomeRun{tt.run}}, &ack)
			if called != tt.want {
				t.Errorf("sink called: %v, want %v", called, tt.want)
			}
			n := uint64(tt.run.GetCount())
			wantAck := &meshv1.OutcomeAck{Rejected: n}
			wantCounts := counts{Received: float64(n), Rejected: float64(n)}
			if tt.want {
				wantAck, wantCounts = &meshv1.OutcomeAck{Accepted: n}, counts{Received: float64(n)}
			}
			if !proto.Equal(&ack, wantAck) {
				t.Errorf("ack = %v, want %v", &ack, wantAck)
			}
			if got := readCounts(s.met); got != wantCounts {
				t.Errorf("counts = %+v, want %+v", got, wantCounts)
			}
		})
	}
}

// TestServiceReadsTimedOut: a failure marked timed_out reaches the sink as TimedOut, an
// unmarked one as Failure; the mark means nothing on a success.
func TestServiceReadsTimedOut(t *testing.T) {
	var got []Outcome
	s, err := NewService(ServiceOptions{Logger: quiet, Sink: func(_, _ string, _ uint64, o Outcome, _ int) bool {
		got = append(got, o)
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	runs := []*meshv1.OutcomeRun{
		{WorkerId: "w", Outcome: meshv1.Outcome_OUTCOME_FAILURE, TimedOut: true, Count: 1},
		{WorkerId: "w", Outcome: meshv1.Outcome_OUTCOME_FAILURE, Count: 1},
		{WorkerId: "w", Outcome: meshv1.Outcome_OUTCOME_SUCCESS, TimedOut: true, Count: 1},
	}
	var ack meshv1.OutcomeAck
	s.apply(&meshv1.OutcomeBatch{From: "p", Runs: runs}, &ack)
	if want := []Outcome{TimedOut, Failure, Success}; !slices.Equal(got, want) {
		t.Errorf("sink got %v, want %v", got, want)
	}
}

func TestMetricsStartAtZero(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	want := `# HELP meshgw_mesh_outcome_reports_total Outcome reports of requests proxied to workers owned by another gateway, by result: sent and dropped by this gateway as reporter, received and rejected by it as owner.
# TYPE meshgw_mesh_outcome_reports_total counter
meshgw_mesh_outcome_reports_total{result="dropped"} 0
meshgw_mesh_outcome_reports_total{result="received"} 0
meshgw_mesh_outcome_reports_total{result="rejected"} 0
meshgw_mesh_outcome_reports_total{result="sent"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registering the counter twice succeeded")
	}
}

func TestServiceCloseEndsStreamsForGracefulStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, owner := newNetwork(), startOwner(t)
		n.set("a", owner.lis)
		r := newTestReporter(t, n, Config{})
		r.Report("a", "w1", 1, Success)
		testkit.Advance(r.cfg.FlushInterval)
		synctest.Wait() // the reporter's stream is open
		stopped := make(chan struct{})
		go func() { owner.srv.GracefulStop(); close(stopped) }()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("GracefulStop returned with a reporter's stream open")
		default:
		}
		owner.svc.Close()
		synctest.Wait()
		select {
		case <-stopped:
		default:
			t.Fatal("GracefulStop still waits after Service.Close")
		}
	})
}

// TestReportOverTCP runs a reporter and an owner over 127.0.0.1 with the default dial options;
// TestMain checks that Close leaves no goroutine behind.
func TestReportOverTCP(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan sinkCall, 16)
	svc, err := NewService(ServiceOptions{Logger: quiet, Sink: func(from, w string, e uint64, o Outcome, n int) bool {
		got <- sinkCall{from, w, e, o, n}
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	svc.Register(srv)
	served := make(chan struct{})
	go func() { _ = srv.Serve(lis); close(served) }()
	r, err := NewReporter(Config{From: "b", Logger: quiet,
		Resolve: func(string) (string, bool) { return lis.Addr().String(), true }})
	if err != nil {
		t.Fatal(err)
	}
	r.Report("a", "w1", 4, Failure)
	r.Report("a", "w1", 4, Failure)
	select {
	case c := <-got:
		if want := (sinkCall{"b", "w1", 4, Failure, 2}); c != want {
			t.Errorf("sink call = %+v, want %+v", c, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no report reached the owner within 10 s")
	}
	r.Close()
	svc.Close()
	srv.GracefulStop()
	<-served
}

// FuzzServiceApply feeds arbitrary bytes, decoded as a batch, to the owner's side: the sink is
// only called with valid runs, and every report is counted once, accepted or rejected.
func FuzzServiceApply(f *testing.F) {
	seed, _ := proto.Marshal(&meshv1.OutcomeBatch{From: "p", Runs: []*meshv1.OutcomeRun{
		{WorkerId: "w", Epoch: 1, Outcome: meshv1.Outcome_OUTCOME_SUCCESS, Count: 3},
		{WorkerId: "", Outcome: meshv1.Outcome_OUTCOME_FAILURE, Count: 1},
	}})
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var b meshv1.OutcomeBatch
		if proto.Unmarshal(data, &b) != nil {
			return
		}
		s, err := NewService(ServiceOptions{Logger: quiet, Sink: func(_, w string, _ uint64, o Outcome, n int) bool {
			if w == "" || !o.valid() || n < 1 || n > MaxRunCount {
				t.Fatalf("sink called with an invalid run: %q %v %d", w, o, n)
			}
			return n%2 == 0
		}})
		if err != nil {
			t.Fatal(err)
		}
		var ack meshv1.OutcomeAck
		s.apply(&b, &ack)
		var total uint64
		for _, r := range b.GetRuns() {
			total += uint64(r.GetCount())
		}
		if ack.GetAccepted()+ack.GetRejected() != total {
			t.Fatalf("ack %v does not add up to %d reports", &ack, total)
		}
	})
}
