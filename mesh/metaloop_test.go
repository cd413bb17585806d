package mesh

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/test/logbuf"
)

// fakeMeta is a MetaSetter that records when each SetMeta ran and what it published.
type fakeMeta struct {
	mu   sync.Mutex
	meta Meta
	err  error
	sets []time.Duration // since start
	t0   time.Time
}

func (f *fakeMeta) Local() Meta {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.meta
}

func (f *fakeMeta) SetMeta(edit func(*Meta)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets = append(f.sets, time.Since(f.t0))
	if f.err != nil {
		return f.err
	}
	edit(&f.meta)
	return nil
}

func (f *fakeMeta) published() ([]time.Duration, Progress) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sets...), progressOf(f.meta)
}

// source is a Progress that a test changes.
type source struct {
	mu  sync.Mutex
	cur Progress
}

func (s *source) Progress() Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func (s *source) set(p Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = p
}

// TestProgressPublisher: the metadata is gossiped only when it changed, at most every Interval
// (at the first read after the change).
func TestProgressPublisher(t *testing.T) {
	const iv = DefaultProgressInterval
	type change struct {
		at time.Duration // since start
		p  Progress
	}
	p1 := Progress{AppliedIndex: 1, ClusterID: "c1"}
	p2 := Progress{AppliedIndex: 2, ClusterID: "c1", OwnedWorkers: 3}
	p3 := Progress{AppliedIndex: 3, ClusterID: "c1", OwnedWorkers: 3}
	tests := []struct {
		name    string
		initial Progress // the metadata published before Run
		start   Progress
		changes []change
		want    []time.Duration
		last    Progress
	}{
		{"nothing changed", p1, p1, nil, nil, p1},
		{"published at start", Progress{}, p1, nil, []time.Duration{0}, p1},
		{"a change waits for the next read", p1, p1, []change{{10*iv + iv/5, p2}}, []time.Duration{11 * iv}, p2},
		{"at most every interval", Progress{}, p1, []change{{iv / 5, p2}}, []time.Duration{0, iv}, p2},
		{"changes within the interval coalesce", Progress{}, p1,
			[]change{{iv / 5, p2}, {iv / 2, p3}}, []time.Duration{0, iv}, p3},
		{"every interval while it changes", p1, p1,
			[]change{{iv / 5, p2}, {iv + iv/5, p3}}, []time.Duration{iv, 2 * iv}, p3},
		{"a change back is no change", p1, p1, []change{{iv / 5, p2}, {iv / 2, p1}}, nil, p1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &fakeMeta{t0: time.Now()}
				m.meta.AppliedIndex, m.meta.ClusterID, m.meta.OwnedWorkers = tt.initial.AppliedIndex, tt.initial.ClusterID, tt.initial.OwnedWorkers
				src := &source{cur: tt.start}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					defer close(done)
					ProgressPublisher{Mesh: m, Progress: src.Progress}.Run(ctx)
				}()
				for _, c := range tt.changes {
					<-time.After(c.at - time.Since(m.t0)) // the bubble's fake clock
					src.set(c.p)
				}
				<-time.After(20*iv - time.Since(m.t0))
				synctest.Wait()
				cancel()
				<-done
				sets, last := m.published()
				if diff := cmp.Diff(tt.want, sets); diff != "" {
					t.Errorf("SetMeta calls since start (-want +got):\n%s", diff)
				}
				if last != tt.last {
					t.Errorf("published %+v, want %+v", last, tt.last)
				}
			})
		})
	}
}

// TestProgressPublisherErrors: a failed gossip is logged, except after Leave or Shutdown, and
// retried at the next read.
func TestProgressPublisherErrors(t *testing.T) {
	tests := []struct {
		err      error
		wantLogs int
	}{{errors.New("timeout"), 1}, {ErrLeft, 0}, {ErrShutdown, 0}}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs logbuf.Buffer
				m := &fakeMeta{t0: time.Now(), err: tt.err}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					defer close(done)
					ProgressPublisher{Mesh: m, Progress: func() Progress { return Progress{AppliedIndex: 1} },
						Logger: logs.Logger(slog.LevelInfo)}.Run(ctx)
				}()
				<-time.After(DefaultProgressInterval / 2)
				synctest.Wait()
				cancel()
				<-done
				if sets, _ := m.published(); len(sets) != 1 {
					t.Errorf("SetMeta ran at %v, want once", sets)
				}
				if got := logs.Lines("gossiping this node's metadata failed"); len(got) != tt.wantLogs {
					t.Errorf("log lines %q, want %d", got, tt.wantLogs)
				}
			})
		})
	}
}

// TestProgressPublisherClock: the injected clock decides when the next read comes.
func TestProgressPublisherClock(t *testing.T) {
	ticks, asked := make(chan time.Time), make(chan time.Duration, 1)
	m, src := &fakeMeta{}, &source{cur: Progress{AppliedIndex: 1}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ProgressPublisher{Mesh: m, Progress: src.Progress, Interval: time.Hour,
			After: func(d time.Duration) <-chan time.Time { asked <- d; return ticks }}.Run(ctx)
	}()
	if d := <-asked; d != time.Hour {
		t.Errorf("waited for %s, want the interval", d)
	}
	src.set(Progress{AppliedIndex: 2})
	ticks <- time.Time{}
	<-asked // the second read is done
	if _, got := m.published(); got.AppliedIndex != 2 {
		t.Errorf("published %+v after the tick", got)
	}
	cancel()
	<-done
}

// TestProgressPublisherUrgent: an urgent signal publishes at once, without waiting for the
// interval (the end of rejoining, which the leader waits for to promote this node).
func TestProgressPublisherUrgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeMeta{t0: time.Now()}
		m.meta.Rejoining = true
		src := &source{cur: Progress{Rejoining: true}}
		urgent := make(chan struct{}, 1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			ProgressPublisher{Mesh: m, Progress: src.Progress, Urgent: urgent}.Run(ctx)
		}()
		<-time.After(DefaultProgressInterval / 5)
		src.set(Progress{})
		urgent <- struct{}{}
		synctest.Wait()
		sets, last := m.published()
		if diff := cmp.Diff([]time.Duration{DefaultProgressInterval / 5}, sets); diff != "" {
			t.Errorf("SetMeta calls since start (-want +got):\n%s", diff)
		}
		if last.Rejoining {
			t.Error("still published as rejoining")
		}
		cancel()
		<-done
	})
}
