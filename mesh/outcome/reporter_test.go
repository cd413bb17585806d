package outcome

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/test/testkit"
)

// report is one Report call of a test.
type report struct {
	owner, worker string
	epoch         uint64
	o             Outcome
}

func TestReportMergesRunsInOrder(t *testing.T) {
	s, f := Success, Failure
	tests := []struct {
		name    string
		reports []report
		want    []sinkCall
		sent    float64
	}{
		{
			name:    "steady successes are one run",
			reports: []report{{"a", "w1", 1, s}, {"a", "w1", 1, s}, {"a", "w1", 1, s}},
			want:    []sinkCall{{"self", "w1", 1, s, 3}},
			sent:    3,
		},
		{
			name: "a change of outcome, worker or epoch starts a run, order kept",
			reports: []report{{"a", "w1", 1, s}, {"a", "w1", 1, s}, {"a", "w1", 1, f}, {"a", "w2", 1, f},
				{"a", "w2", 1, f}, {"a", "w1", 1, s}, {"a", "w1", 2, s}},
			want: []sinkCall{{"self", "w1", 1, s, 2}, {"self", "w1", 1, f, 1}, {"self", "w2", 1, f, 2},
				{"self", "w1", 1, s, 1}, {"self", "w1", 2, s, 1}},
			sent: 7,
		},
		{
			name: "timed-out failures are runs of their own, and reach the owner as such",
			reports: []report{{"a", "w1", 1, s}, {"a", "w1", 1, f}, {"a", "w1", 1, TimedOut}, {"a", "w1", 1, TimedOut},
				{"a", "w1", 1, f}},
			want: []sinkCall{{"self", "w1", 1, s, 1}, {"self", "w1", 1, f, 1}, {"self", "w1", 1, TimedOut, 2},
				{"self", "w1", 1, f, 1}},
			sent: 5,
		},
		{
			name: "nothing, no owner and this gateway as owner are skipped",
			reports: []report{{"a", "w1", 1, 0}, {"", "w1", 1, s}, {"self", "w1", 1, s}, {"a", "w1", 1, f},
				{"a", "w1", 1, 7}},
			want: []sinkCall{{"self", "w1", 1, f, 1}},
			sent: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n, owner := newNetwork(), startOwner(t)
				n.set("a", owner.lis)
				r := newTestReporter(t, n, Config{})
				for _, rp := range tt.reports {
					r.Report(rp.owner, rp.worker, rp.epoch, rp.o)
				}
				testkit.Advance(r.cfg.FlushInterval)
				if diff := cmp.Diff(tt.want, owner.got()); diff != "" {
					t.Errorf("sink calls (-want +got):\n%s", diff)
				}
				want := counts{Sent: tt.sent}
				if got := readCounts(r.met); got != want {
					t.Errorf("reporter counts = %+v, want %+v", got, want)
				}
				if got := readCounts(owner.met); got.Received != tt.sent {
					t.Errorf("owner received %v reports, want %v", got.Received, tt.sent)
				}
			})
		})
	}
}

func TestReportFlushesAFullBatchAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, owner := newNetwork(), startOwner(t)
		n.set("a", owner.lis)
		r := newTestReporter(t, n, Config{MaxBatch: 4})
		for i := range 4 {
			r.Report("a", "w1", uint64(i), Success) // four runs: epochs differ
		}
		synctest.Wait() // no time passes
		if got := len(owner.got()); got != 4 {
			t.Fatalf("a full batch sent %d runs before the flush interval, want 4", got)
		}
	})
}

func TestReportDropsBeyondMaxPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, owner := newNetwork(), startOwner(t)
		n.set("a", owner.lis)
		r := newTestReporter(t, n, Config{MaxPending: 3, MaxBatch: 100}) // no early flush
		for i := range 10 {
			r.Report("a", "w1", uint64(i+1), Success) // distinct epochs: no run merges
		}
		r.Report("a", "w1", 3, Success) // merges into the last queued run: kept
		if got, want := readCounts(r.met), (counts{Dropped: 7}); got != want {
			t.Errorf("counts before the flush = %+v, want %+v", got, want)
		}
		testkit.Advance(r.cfg.FlushInterval)
		want := []sinkCall{{"self", "w1", 1, Success, 1}, {"self", "w1", 2, Success, 1}, {"self", "w1", 3, Success, 2}}
		if diff := cmp.Diff(want, owner.got()); diff != "" {
			t.Errorf("sink calls (-want +got):\n%s", diff)
		}
		if got, want := readCounts(r.met), (counts{Sent: 4, Dropped: 7}); got != want {
			t.Errorf("counts after the flush = %+v, want %+v", got, want)
		}
	})
}

func TestReportRunsSplitAtMaxRunCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, owner := newNetwork(), startOwner(t)
		n.set("a", owner.lis)
		r := newTestReporter(t, n, Config{})
		for range MaxRunCount + 2 {
			r.Report("a", "w1", 1, Failure)
		}
		testkit.Advance(r.cfg.FlushInterval)
		want := []sinkCall{{"self", "w1", 1, Failure, MaxRunCount}, {"self", "w1", 1, Failure, 2}}
		if diff := cmp.Diff(want, owner.got()); diff != "" {
			t.Errorf("sink calls (-want +got):\n%s", diff)
		}
	})
}

func TestRejectedReportsAreCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, owner := newNetwork(), startOwner(t, "gone")
		n.set("a", owner.lis)
		r := newTestReporter(t, n, Config{})
		r.Report("a", "w1", 1, Success)
		r.Report("a", "gone", 3, Failure)
		r.Report("a", "gone", 3, Failure)
		r.Report("a", "w1", 1, Success)
		testkit.Advance(r.cfg.FlushInterval)
		want := []sinkCall{{"self", "w1", 1, Success, 1}, {"self", "w1", 1, Success, 1}}
		if diff := cmp.Diff(want, owner.got()); diff != "" {
			t.Errorf("sink calls (-want +got):\n%s", diff)
		}
		if got, want := readCounts(owner.met), (counts{Received: 4, Rejected: 2}); got != want {
			t.Errorf("owner counts = %+v, want %+v", got, want)
		}
		if got, want := readCounts(r.met), (counts{Sent: 4}); got != want {
			t.Errorf("reporter counts = %+v, want %+v (a rejection is the owner's to count)", got, want)
		}
	})
}

func TestOwnerDownNeverBlocksAndReconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, owner := newNetwork(), startOwner(t) // not on the network yet: refuses connections
		r := newTestReporter(t, n, Config{})
		start := time.Now()
		for i := range 1000 {
			r.Report("a", "w1", 1, Outcome(i%2+1))
			r.Report("unknown", "w2", 1, Success)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("Report took %v of the fake clock, want none", d)
		}
		testkit.Advance(r.cfg.FlushInterval)
		if got, want := readCounts(r.met), (counts{Dropped: 2000}); got != want {
			t.Fatalf("counts while the owners are down = %+v, want %+v", got, want)
		}

		n.set("a", owner.lis)
		testkit.Advance(r.cfg.MaxBackoff) // past the backoff of the failed open
		r.Report("a", "w1", 7, Failure)
		testkit.Advance(r.cfg.FlushInterval)
		if diff := cmp.Diff([]sinkCall{{"self", "w1", 7, Failure, 1}}, owner.got()); diff != "" {
			t.Errorf("sink calls after the owner came up (-want +got):\n%s", diff)
		}
		if got, want := readCounts(r.met), (counts{Sent: 1, Dropped: 2000}); got != want {
			t.Errorf("counts after the owner came up = %+v, want %+v", got, want)
		}
	})
}

func TestOwnerStopsMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, first := newNetwork(), startOwner(t)
		n.set("a", first.lis)
		r := newTestReporter(t, n, Config{})
		r.Report("a", "w1", 1, Success)
		testkit.Advance(r.cfg.FlushInterval)
		first.stop() // ends the stream with its totals; the next send fails
		n.set("a", nil)

		second := startOwner(t) // the owner restarts elsewhere
		n.set("a", second.lis)
		deadline := time.Now().Add(time.Minute)
		for len(second.got()) == 0 && time.Now().Before(deadline) {
			r.Report("a", "w1", 1, Success)
			testkit.Advance(r.cfg.FlushInterval)
		}
		if len(second.got()) == 0 {
			t.Fatal("reports never reached the restarted owner")
		}
		if c := readCounts(r.met); c.Sent < 2 {
			t.Errorf("counts = %+v, want at least 2 sent", c)
		}
	})
}

func TestIdleOwnerIsRetired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, owner := newNetwork(), startOwner(t)
		n.set("a", owner.lis)
		r := newTestReporter(t, n, Config{IdleTimeout: time.Second})
		r.Report("a", "w1", 1, Success)
		testkit.Advance(r.cfg.IdleTimeout + 3*r.cfg.FlushInterval)
		r.mu.RLock()
		left := len(r.owners)
		r.mu.RUnlock()
		if left != 0 {
			t.Fatalf("%d owner loops left after the idle timeout, want 0", left)
		}
		r.Report("a", "w1", 1, Failure) // starts a new loop
		testkit.Advance(r.cfg.FlushInterval)
		want := []sinkCall{{"self", "w1", 1, Success, 1}, {"self", "w1", 1, Failure, 1}}
		if diff := cmp.Diff(want, owner.got()); diff != "" {
			t.Errorf("sink calls (-want +got):\n%s", diff)
		}
	})
}

func TestCloseFlushesAndDropsLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, owner := newNetwork(), startOwner(t)
		n.set("a", owner.lis)
		r := newTestReporter(t, n, Config{})
		r.Report("a", "w1", 1, Success)
		r.Close() // before the first flush: the last flush sends it
		r.Report("a", "w1", 1, Success)
		r.Close()
		synctest.Wait()
		if diff := cmp.Diff([]sinkCall{{"self", "w1", 1, Success, 1}}, owner.got()); diff != "" {
			t.Errorf("sink calls (-want +got):\n%s", diff)
		}
		if got, want := readCounts(r.met), (counts{Sent: 1, Dropped: 1}); got != want {
			t.Errorf("counts = %+v, want %+v", got, want)
		}
	})
}

func TestNewReporterNeedsResolve(t *testing.T) {
	if _, err := NewReporter(Config{}); err == nil {
		t.Fatal("NewReporter without Resolve succeeded")
	}
}
