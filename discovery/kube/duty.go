package kube

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/leader"
	"github.com/meshgw/meshgw/worker"
)

// DefaultInterval is how often the leader reconciles without a signal.
const DefaultInterval = 5 * time.Second

// notReadyRetry is how soon a pass asks again for a sink that was not ready (ErrNotReady).
const notReadyRetry = 200 * time.Millisecond

// syncRetry is how soon a pass looks again while the watcher's first list is not synced: the
// informer's events (which wake a pass) may all come before HasSynced turns true, and no
// event need follow it.
const syncRetry = 100 * time.Millisecond

// Sink writes discovery's actions for one term of leadership, through the admin API's write
// path: Register is POST /workers of spec, Remove is DELETE /workers/{id} (a ready worker drains
// for its drain_settle_secs, then its owner removes the record; any other is removed at once).
// Its writes must fail once the term it was made for is over (ErrFenced or a raft error).
type Sink interface {
	Register(ctx context.Context, spec worker.Spec) error
	Remove(ctx context.Context, id worker.ID) error
}

// Records are the worker records as this node applied them; *consensus.Node implements it.
type Records interface {
	Workers() []fsm.Record
	// Watch signals after the applied records changed (a drain's removal, for one).
	Watch() (<-chan struct{}, func())
}

// ErrFenced is a Sink's error for a write of a term that is over.
var ErrFenced = errors.New("discovery: the raft term this leader watched for is over")

// ErrNotReady is DutyConfig.Sink's error while the gateway cannot write yet (still starting):
// the next pass asks again, without a warning.
var ErrNotReady = errors.New("discovery: the gateway is still starting")

// DutyConfig is what the leader's discovery duty needs.
type DutyConfig struct {
	Client kubernetes.Interface
	Config Config
	// Records are the applied records. Required.
	Records Records
	// Sink returns the writer of one term, fenced by the term current when it is called.
	// Required.
	Sink func() (Sink, error)
	// Interval backs up the signals; zero means DefaultInterval.
	Interval time.Duration
	Logger   *slog.Logger
	Now      func() time.Time
}

// Duty is Kubernetes discovery as a leader.Duty: while this node leads, a Watcher of its own
// (a fresh list at the start of each term) feeds Plan, and the actions go to the term's Sink.
type Duty struct {
	cfg DutyConfig
	log *slog.Logger
}

// NewDuty makes the duty.
func NewDuty(cfg DutyConfig) (*Duty, error) {
	if cfg.Client == nil || cfg.Records == nil || cfg.Sink == nil || cfg.Config.Selector == nil {
		return nil, errors.New("discovery: DutyConfig needs Client, Records, Sink and Config.Selector")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Duty{cfg: cfg, log: cfg.Logger.With("component", "discovery")}, nil
}

// Term implements leader.Duty: each term watches anew, so a new leader starts from a fresh list.
func (d *Duty) Term() leader.Term {
	t := &term{d: d, skipped: map[string]string{}}
	return leader.Term{Watch: t.watch, Interval: d.cfg.Interval, Pass: t.pass}
}

// term is one term of leadership's discovery.
type term struct {
	d       *Duty
	w       *Watcher
	sink    Sink
	skipped map[string]string // pod -> the reason last logged
	synced  bool
}

// watch starts the term's watcher and merges its signals with the records'.
func (t *term) watch() (<-chan struct{}, func()) {
	out := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := NewWatcher(t.d.cfg.Client, t.d.cfg.Config.Namespace, t.d.cfg.Config.Selector, t.d.log)
	if err != nil {
		t.d.log.Error("kubernetes discovery cannot watch pods", "err", err)
		cancel()
		return out, func() {}
	}
	t.w = w
	w.Start(ctx)
	recs, stopRecs := t.d.cfg.Records.Watch()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-w.Changed():
			case <-recs:
			case <-ctx.Done():
				return
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, func() {
		cancel()
		stopRecs()
		<-done
		w.Stop()
	}
}

// pass reconciles once: nothing before the first list completed (an empty view must not remove
// every worker), then Plan's actions, in order, until one fails.
func (t *term) pass(ctx context.Context, _ leader.Wake) time.Time {
	if t.w == nil {
		return time.Time{}
	}
	if !t.w.Synced() {
		return t.d.cfg.Now().Add(syncRetry)
	}
	if !t.synced {
		t.synced = true
		t.d.log.Info("kubernetes discovery: listed the pods; reconciling as the raft leader", "where", t.w.where)
	}
	if t.sink == nil {
		s, err := t.d.cfg.Sink()
		if err != nil {
			if errors.Is(err, ErrNotReady) {
				t.d.log.Debug("kubernetes discovery cannot write yet", "err", err)
				return t.d.cfg.Now().Add(notReadyRetry)
			}
			t.d.log.Warn("kubernetes discovery cannot write this term", "err", err)
			return time.Time{}
		}
		t.sink = s
	}
	pods, err := t.w.Pods()
	if err != nil {
		t.d.log.Warn("kubernetes discovery cannot read its pods", "err", err)
		return time.Time{}
	}
	acts, next, skipped := Plan(t.d.cfg.Now(), pods, t.d.cfg.Records.Workers(), t.d.cfg.Config.Rules)
	t.logSkipped(skipped)
	for _, a := range acts {
		if ctx.Err() != nil {
			return time.Time{}
		}
		var err error
		switch a.Op {
		case Register:
			err = t.sink.Register(ctx, a.Spec)
		case Remove:
			err = t.sink.Remove(ctx, a.ID)
		}
		if err != nil {
			t.d.log.Warn("kubernetes discovery: write failed; the next pass retries", "op", a.Op.String(), "id", a.ID, "url", a.URL, "pod", a.Pod, "err", err)
			if errors.Is(err, ErrFenced) {
				return time.Time{}
			}
			continue
		}
		t.d.log.Info("kubernetes discovery", "op", a.Op.String(), "id", a.ID, "url", a.URL, "pod", a.Pod, "why", a.Why)
	}
	return next
}

// logSkipped logs each pod that makes no worker once per reason.
func (t *term) logSkipped(skipped []Skipped) {
	now := map[string]string{}
	for _, s := range skipped {
		msg := s.Err.Error()
		now[s.Pod] = msg
		if t.skipped[s.Pod] != msg {
			t.d.log.Warn("kubernetes discovery: pod makes no worker", "pod", s.Pod, "err", msg)
		}
	}
	t.skipped = now
}
