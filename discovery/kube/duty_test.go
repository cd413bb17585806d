package kube

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/leader"
	"github.com/meshgw/meshgw/test/fakekube"
	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// store is the raft records as the duty sees them, and the sink writing them: it counts every
// write per worker, so that a test sees a record written twice.
type store struct {
	mu      sync.Mutex
	recs    map[worker.ID]fsm.Record
	regs    map[worker.ID]int
	removes map[worker.ID]int
	fenced  atomic.Bool // the term is over: every write fails
	watch   chan struct{}
}

func newStore() *store {
	return &store{recs: map[worker.ID]fsm.Record{}, regs: map[worker.ID]int{}, removes: map[worker.ID]int{}, watch: make(chan struct{}, 1)}
}

func (s *store) Workers() []fsm.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]fsm.Record, 0, len(s.recs))
	for _, r := range s.recs {
		out = append(out, r)
	}
	return out
}

func (s *store) Watch() (<-chan struct{}, func()) { return s.watch, func() {} }

func (s *store) Register(_ context.Context, spec worker.Spec) error {
	if s.fenced.Load() {
		return ErrFenced
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regs[spec.ID()]++
	s.recs[spec.ID()] = fsm.Record{ID: spec.ID(), Spec: spec}
	return nil
}

func (s *store) Remove(_ context.Context, id worker.ID) error {
	if s.fenced.Load() {
		return ErrFenced
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removes[id]++
	delete(s.recs, id)
	return nil
}

// urls lists the records' URLs, sorted.
func (s *store) urls() string {
	var out []string
	for _, r := range s.Workers() {
		out = append(out, r.Spec.URL)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func (s *store) twice() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, n := range s.regs {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s registered %d times", id, n))
		}
	}
	for id, n := range s.removes {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s removed %d times", id, n))
		}
	}
	return strings.Join(out, "; ")
}

// clock is the duty's clock, moved by the test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// connect is a client of api through a kubeconfig file the test writes, loaded by Connect as
// meshgw loads it ($KUBECONFIG).
func connect(t *testing.T, api *fakekube.Server) kubernetes.Interface {
	t.Helper()
	path, err := api.WriteKubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	c, from, err := Connect("meshgw-test")
	if err != nil {
		t.Fatal(err)
	}
	if from != "$KUBECONFIG" {
		t.Errorf("configuration from %q, want $KUBECONFIG", from)
	}
	return c
}

// runDuty runs the duty for one term until the test ends.
func runDuty(t *testing.T, d *Duty) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); leader.Run(ctx, d) }()
	t.Cleanup(func() { cancel(); <-done })
}

var sglang = map[string]string{"app": "sglang"}

// TestDutyFollowsPods drives the duty through client-go's real transport and informer against
// the scripted API server: pods appear, become Ready, flap, lose readiness past the grace, are
// deleted and change IP; the server closes the watch and expires its history (410 Gone, a new
// list); a pod without the port annotation uses the port flag. No record is written twice.
func TestDutyFollowsPods(t *testing.T) {
	t.Run("streaming list", func(t *testing.T) { followPods(t, false) })
	t.Run("plain list", func(t *testing.T) { followPods(t, true) })
}

// followPods is TestDutyFollowsPods against a server with streaming lists (what client-go tries
// first) or without (its fallback: a list, then a watch from the list's resourceVersion).
func followPods(t *testing.T, plain bool) {
	api := fakekube.New()
	defer api.Close()
	if plain {
		api.RefuseStreamingLists()
	}
	client := connect(t, api)
	st := newStore()
	clk := &clock{now: time.Now()}
	d, err := NewDuty(DutyConfig{Client: client, Config: Config{Selector: sglang, Namespace: "llm", Rules: Rules{Port: 8000, Grace: 5 * time.Second}},
		Records: st, Sink: func() (Sink, error) { return st, nil }, Interval: 20 * time.Millisecond, Now: clk.Now, Logger: testkit.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	runDuty(t, d)
	at := clk.Now().Add(-time.Minute)
	a := fakekube.ReadyPod("llm", "a", "10.1.0.1", sglang, at)
	b := fakekube.SetReady(fakekube.ReadyPod("llm", "b", "10.1.0.2", sglang, at), false, at)
	b.Annotations = map[string]string{AnnotationWorkerPorts: "9000,9001"}
	api.Apply(a)
	api.Apply(b)
	api.Apply(fakekube.ReadyPod("llm", "other-app", "10.1.0.9", map[string]string{"app": "vllm"}, at))
	api.Apply(fakekube.ReadyPod("elsewhere", "c", "10.1.0.8", sglang, at))
	testkit.For(t, "the Ready pod registered at the port flag", func() bool { return st.urls() == "http://10.1.0.1:8000" })

	api.Apply(fakekube.SetReady(b, true, clk.Now()))
	testkit.For(t, "the pod that became Ready registered at its annotation's ports", func() bool {
		return st.urls() == "http://10.1.0.1:8000 http://10.1.0.2:9000 http://10.1.0.2:9001"
	})

	// A flap shorter than the grace changes nothing.
	api.Apply(fakekube.SetReady(a, false, clk.Now()))
	clk.Add(4 * time.Second)
	api.Apply(fakekube.SetReady(a, true, clk.Now()))
	api.Apply(fakekube.ReadyPod("llm", "marker", "10.1.0.3", sglang, clk.Now()))
	testkit.For(t, "the marker pod registered", func() bool { return strings.Contains(st.urls(), "10.1.0.3") })
	if !strings.Contains(st.urls(), "http://10.1.0.1:8000") {
		t.Fatalf("the flapping pod lost its record: %s", st.urls())
	}

	// Not Ready past the grace: drained and removed.
	api.Apply(fakekube.SetReady(a, false, clk.Now()))
	clk.Add(6 * time.Second)
	testkit.For(t, "the pod not Ready past the grace removed", func() bool { return !strings.Contains(st.urls(), "10.1.0.1") })

	// The server closes the watch; then expires its history, so the resumed watch gets 410 Gone
	// and the reflector lists again. Changes meanwhile still arrive.
	_, _, _, _ = api.Stats()
	api.CloseWatches()
	api.Apply(fakekube.SetIP(fakekube.ReadyPod("llm", "marker", "", sglang, clk.Now()), "10.1.0.4"))
	testkit.For(t, "an IP change after a closed watch: the new address registered, the old removed", func() bool {
		return strings.Contains(st.urls(), "10.1.0.4") && !strings.Contains(st.urls(), "10.1.0.3")
	})
	lists0, _, _, _ := api.Stats()
	api.Expire()
	api.Delete("llm", "b")
	testkit.For(t, "the deleted pod removed after the history expired", func() bool { return st.urls() == "http://10.1.0.4:8000" })
	if lists, _, gone, _ := api.Stats(); gone == 0 || lists == lists0 {
		t.Errorf("the watch after Expire did not get 410 Gone and list again (lists %d, gone %d)", lists, gone)
	}
	if tw := st.twice(); tw != "" {
		t.Error(tw)
	}
}

// TestDutyForbiddenNamespace: a namespace the service account may not list is a clear error,
// retried with the reflector's backoff (no crash, no tight loop), and nothing is written.
func TestDutyForbiddenNamespace(t *testing.T) {
	api := fakekube.New()
	defer api.Close()
	api.Forbid("secret")
	api.Apply(fakekube.ReadyPod("secret", "a", "10.1.0.1", sglang, time.Now()))
	client := connect(t, api)
	st := newStore()
	st.recs["w"] = fsm.Record{ID: "w", Spec: worker.Spec{URL: "http://10.9.9.9:80", Labels: map[string]string{LabelSource: SourceKubernetes}}}
	logs := &logbuf.Buffer{}
	w, err := NewWatcher(client, "secret", sglang, logs.Logger(slog.LevelDebug))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); w.Stop() }()
	w.Start(ctx)
	testkit.For(t, "the watcher reports the refusal", func() bool { return w.Err() != nil })
	if msg := w.Err().Error(); !strings.Contains(msg, "forbidden to list pods in namespace secret") || !strings.Contains(msg, "list and watch on pods") {
		t.Errorf("error %q does not say what to grant", msg)
	}
	if w.Synced() {
		t.Error("synced without a list")
	}
	start := time.Now()
	testkit.For(t, "a retry", func() bool { _, _, _, refused := api.Stats(); return refused >= 2 })
	_, _, _, refused := api.Stats()
	if per := float64(refused) / time.Since(start).Seconds(); refused > 20 && per > 20 {
		t.Errorf("%d refused requests, %.0f/s: a tight loop", refused, per)
	}
	testkit.For(t, "the log names the refusal", func() bool { return strings.Contains(logs.String(), "forbidden to list pods in namespace secret") })
	if n := strings.Count(logs.String(), "forbidden to list pods"); n != 1 {
		t.Errorf("the refusal logged %d times, want once while it repeats: %s", n, logs.String())
	}

	d, err := NewDuty(DutyConfig{Client: client, Config: Config{Selector: sglang, Namespace: "secret", Rules: Rules{Port: 80}},
		Records: st, Sink: func() (Sink, error) { return st, nil }, Interval: 10 * time.Millisecond, Logger: testkit.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	runDuty(t, d)
	testkit.For(t, "more refusals", func() bool { _, _, _, n := api.Stats(); return n >= refused+1 })
	if st.urls() != "http://10.9.9.9:80" {
		t.Errorf("records %q: a duty that cannot list must not write", st.urls())
	}
}

// TestDutyFencedTerm: a sink whose term is over writes nothing, and the pass stops at the first
// refusal; a new term (a new leader) lists afresh and writes.
func TestDutyFencedTerm(t *testing.T) {
	api := fakekube.New()
	defer api.Close()
	client := connect(t, api)
	for i := range 3 {
		api.Apply(fakekube.ReadyPod("llm", fmt.Sprintf("p%d", i), fmt.Sprintf("10.1.0.%d", i+1), sglang, time.Now()))
	}
	st := newStore()
	st.fenced.Store(true)
	var sinks atomic.Int32
	logs := &logbuf.Buffer{}
	d, err := NewDuty(DutyConfig{Client: client, Config: Config{Selector: sglang, Rules: Rules{Port: 80}}, Records: st,
		Sink: func() (Sink, error) { sinks.Add(1); return st, nil }, Interval: 10 * time.Millisecond, Logger: logs.Logger(slog.LevelDebug)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); leader.Run(ctx, d) }()
	testkit.For(t, "a refused write", func() bool { return strings.Contains(logs.String(), ErrFenced.Error()) })
	cancel()
	<-done
	if st.urls() != "" {
		t.Fatalf("a fenced term wrote %q", st.urls())
	}
	lists, watches, _, _ := api.Stats()
	st.fenced.Store(false)
	runDuty(t, d)
	testkit.For(t, "the next term registers every pod", func() bool { return len(st.Workers()) == 3 })
	if l, w, _, _ := api.Stats(); l+w <= lists+watches {
		t.Errorf("the new term did not list afresh (lists+watches %d then %d)", lists+watches, l+w)
	}
	if sinks.Load() != 2 {
		t.Errorf("%d sinks made, want one per term", sinks.Load())
	}
}

// TestDutyWaitsForSink: while the gateway is still starting (the sink answers ErrNotReady) the
// duty asks again soon and quietly, then writes.
func TestDutyWaitsForSink(t *testing.T) {
	api := fakekube.New()
	defer api.Close()
	client := connect(t, api)
	api.Apply(fakekube.ReadyPod("llm", "a", "10.1.0.1", sglang, time.Now()))
	st := newStore()
	var asked atomic.Int32
	logs := &logbuf.Buffer{}
	d, err := NewDuty(DutyConfig{Client: client, Config: Config{Selector: sglang, Rules: Rules{Port: 80}}, Records: st,
		Sink: func() (Sink, error) {
			if asked.Add(1) < 3 {
				return nil, ErrNotReady
			}
			return st, nil
		}, Interval: time.Hour, Logger: logs.Logger(slog.LevelInfo)})
	if err != nil {
		t.Fatal(err)
	}
	runDuty(t, d)
	testkit.For(t, "the pod registered once the sink is ready", func() bool { return st.urls() == "http://10.1.0.1:80" })
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("a warning while the gateway was starting: %s", logs.String())
	}
}
