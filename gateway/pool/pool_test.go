package pool

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

type fakeBreaker struct{ open atomic.Bool }

func (b *fakeBreaker) Allow() bool { return !b.open.Load() }

type fakeTransport struct{ closed atomic.Bool }

func (f *fakeTransport) Close() { f.closed.Store(true) }

func addN(t testing.TB, p *Pool, n int, mutate func(i int, s *worker.Spec)) []*Worker {
	t.Helper()
	var out []*Worker
	for i := 0; i < n; i++ {
		s := worker.Spec{URL: "http://127.0.0.1:" + strconv.Itoa(9000+i)}
		if mutate != nil {
			mutate(i, &s)
		}
		w, _, err := p.Upsert(s, OriginLocal)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	return out
}

func TestGatesControlRoutability(t *testing.T) {
	var changes atomic.Int32
	p := New(Config{OnChange: func() { changes.Add(1) }})
	ws := addN(t, p, 2, nil)
	id := ws[0].ID
	tests := []struct {
		name     string
		apply    func() (bool, error)
		flipped  bool
		routable bool
	}{
		{"disable", func() (bool, error) { return p.SetFlags(id, true, false) }, true, false},
		{"disable again is no flip", func() (bool, error) { return p.SetFlags(id, true, false) }, false, false},
		{"enable", func() (bool, error) { return p.SetFlags(id, false, false) }, true, true},
		{"quarantine", func() (bool, error) { return p.SetFlags(id, false, true) }, true, false},
		{"release", func() (bool, error) { return p.SetFlags(id, false, false) }, true, true},
		{"not ready", func() (bool, error) { return p.SetHealth(id, health.NotReady) }, true, false},
		{"failed stays closed", func() (bool, error) { return p.SetHealth(id, health.Failed) }, false, false},
		{"ready", func() (bool, error) { return p.SetHealth(id, health.Ready) }, true, true},
		{"draining", func() (bool, error) { return p.SetHealth(id, health.Draining) }, true, false},
		{"ready again", func() (bool, error) { return p.SetHealth(id, health.Ready) }, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := changes.Load()
			flipped, err := tt.apply()
			if err != nil {
				t.Fatal(err)
			}
			if flipped != tt.flipped {
				t.Errorf("flipped = %v, want %v", flipped, tt.flipped)
			}
			if got := changes.Load() - before; (got > 0) != tt.flipped {
				t.Errorf("OnChange called %d times, want a call only on a flip", got)
			}
			in := false
			for _, w := range p.Snapshot().Routable {
				in = in || w.ID == id
			}
			if in != tt.routable {
				t.Errorf("routable = %v, want %v", in, tt.routable)
			}
		})
	}
}

func TestUpsertIdempotentAndReplace(t *testing.T) {
	var made []*fakeTransport
	p := New(Config{NewTransport: func(*Worker) Transport { f := &fakeTransport{}; made = append(made, f); return f }})
	w1, changed, err := p.Upsert(worker.Spec{URL: "HTTP://LocalHost:8000/"}, OriginLocal)
	if err != nil || !changed {
		t.Fatalf("first upsert: changed=%v err=%v", changed, err)
	}
	if w1.URL != "http://localhost:8000" {
		t.Errorf("URL = %q, want canonical", w1.URL)
	}
	if _, changed, _ := p.Upsert(worker.Spec{URL: "http://localhost:8000"}, OriginLocal); changed {
		t.Error("same spec again reported a change")
	}
	if _, err := p.SetFlags(w1.ID, true, false); err != nil {
		t.Fatal(err)
	}
	w2, changed, _ := p.Upsert(worker.Spec{URL: "http://localhost:8000", Model: "m"}, OriginLocal)
	if !changed || w2 == w1 {
		t.Fatal("a changed spec must replace the worker")
	}
	if w2.Gates()&GateDisabled == 0 {
		t.Error("runtime flags must carry over a spec change")
	}
	if !made[0].closed.Load() {
		t.Error("the replaced worker's transport was not closed")
	}
	if err := p.Remove(w2.ID); err != nil || !made[1].closed.Load() {
		t.Errorf("remove: err=%v closed=%v", err, made[1].closed.Load())
	}
	if err := p.Remove(w2.ID); err != ErrNotFound {
		t.Errorf("second remove: %v, want ErrNotFound", err)
	}
	if _, _, err := p.Upsert(worker.Spec{URL: "http://h:1/v1"}, OriginLocal); err == nil {
		t.Error("a worker URL with a path was accepted")
	}
}

// TestAttach: hooks attached to a pool built without them serve its workers; a second Attach,
// or one after a worker was added, fails.
func TestAttach(t *testing.T) {
	p := New(Config{StartPending: true})
	var made, changes int
	if err := p.Attach(func(*Worker) Transport { made++; return &fakeTransport{} }, func() { changes++ }); err != nil {
		t.Fatal(err)
	}
	w, _, err := p.Upsert(worker.Spec{URL: "http://localhost:8000"}, OriginLocal)
	if err != nil {
		t.Fatal(err)
	}
	if made != 1 || changes != 1 || w.Health() != health.Pending {
		t.Errorf("after an upsert: %d transports, %d changes, health %v; want 1, 1, pending", made, changes, w.Health())
	}
	if err := p.Attach(nil, func() {}); err == nil {
		t.Error("a second Attach was accepted")
	}
	bare := New(Config{})
	addN(t, bare, 1, nil)
	if err := bare.Attach(func(*Worker) Transport { return nil }, nil); err == nil {
		t.Error("Attach on a pool holding a worker was accepted")
	}
}

func TestCandidates(t *testing.T) {
	p := New(Config{})
	ws := addN(t, p, 4, func(i int, s *worker.Spec) {
		switch i {
		case 0:
			s.Models = []string{"a"}
		case 1:
			s.Models = []string{"b"}
			s.Capabilities = []string{"chat"}
		case 2:
			s.Capabilities = []string{"embeddings"}
		}
	})
	br := &fakeBreaker{}
	if err := p.SetBreaker(ws[3].ID, br); err != nil {
		t.Fatal(err)
	}
	snap := p.Snapshot()
	ids := func(c []*Worker) string {
		s := ""
		for _, w := range c {
			s += w.URL[len(w.URL)-1:]
		}
		return s
	}
	tests := []struct {
		name  string
		need  worker.Capability
		model string
		avoid *Worker
		open  bool
		want  string // last digit of each port, in id order
	}{
		{"any", worker.CapChat, "", nil, false, ids(filter(snap.Routable, ws[2]))},
		{"model a", worker.CapChat, "a", nil, false, ids([]*Worker{ws[0], ws[3]})},
		{"model b", worker.CapChat, "b", nil, false, ids(sortedByID(ws[1], ws[3]))},
		{"embeddings", worker.CapEmbeddings, "", nil, false, ids(sortedByID(ws[0], ws[2], ws[3]))},
		{"breaker open", worker.CapEmbeddings, "", nil, true, ids(sortedByID(ws[0], ws[2]))},
		{"avoid with others", worker.CapChat, "a", ws[0], false, ids([]*Worker{ws[3]})},
		{"avoid when alone", worker.CapChat, "a", ws[0], true, ids([]*Worker{ws[0]})},
		{"streaming+chat b", worker.CapChat | worker.CapStreaming, "b", nil, false, ids([]*Worker{ws[3]})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br.open.Store(tt.open)
			got := snap.Candidates(nil, tt.need, []byte(tt.model), tt.avoid)
			if ids(got) != tt.want {
				t.Errorf("candidates %q, want %q", ids(got), tt.want)
			}
		})
	}
	br.open.Store(false)
	scratch := make([]*Worker, 0, 8)
	model := []byte("a")
	if a := testing.AllocsPerRun(100, func() { scratch = snap.Candidates(scratch, worker.CapChat, model, nil) }); a != 0 {
		t.Errorf("Candidates allocates %.1f times per call", a)
	}
}

func filter(ws []*Worker, drop *Worker) []*Worker {
	var out []*Worker
	for _, w := range ws {
		if w != drop {
			out = append(out, w)
		}
	}
	return out
}

func sortedByID(ws ...*Worker) []*Worker {
	out := append([]*Worker(nil), ws...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j].ID < out[i].ID {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestLookupByIDOrURL(t *testing.T) {
	p := New(Config{})
	w := addN(t, p, 1, nil)[0]
	snap := p.Snapshot()
	for _, ref := range []string{string(w.ID), w.URL, url.QueryEscape(w.URL), "http://127.0.0.1:9000/"} {
		if got := snap.Lookup(ref); got != w {
			t.Errorf("Lookup(%q) = %v", ref, got)
		}
	}
	if snap.Lookup("w-000000000000") != nil || snap.Lookup("http://127.0.0.1:1") != nil {
		t.Error("Lookup found a worker that does not exist")
	}
}

func TestWhy(t *testing.T) {
	p := New(Config{})
	if got := p.Snapshot().Why(worker.CapChat, nil); got != "no workers are registered" {
		t.Errorf("empty pool: %q", got)
	}
	addN(t, p, 1, func(_ int, s *worker.Spec) { s.Models = []string{"m"}; s.Capabilities = []string{"chat"} })
	for _, tt := range []struct {
		need  worker.Capability
		model string
		want  string
	}{
		{worker.CapChat, "x", `no routable worker serves model "x"`},
		{worker.CapChat | worker.CapImageInput, "m", `no routable worker serving model "m" has capabilities chat,image_input`},
	} {
		if got := p.Snapshot().Why(tt.need, []byte(tt.model)); got != tt.want {
			t.Errorf("Why(%v, %q) = %q, want %q", tt.need, tt.model, got, tt.want)
		}
	}
}

func BenchmarkCandidates(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		p := New(Config{})
		addN(b, p, n, nil)
		snap := p.Snapshot()
		scratch := make([]*Worker, 0, n)
		model := []byte("m")
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				scratch = snap.Candidates(scratch, worker.CapChat|worker.CapStreaming, model, nil)
			}
		})
	}
}

// TestUpsertFlagsGatesInTheSameSwap: a worker added with its record's flags is never seen
// routable by any snapshot, and a flags-only change on the same spec is one swap.
func TestUpsertFlagsGatesInTheSameSwap(t *testing.T) {
	var p *Pool
	var sawRoutable atomic.Bool
	p = New(Config{OnChange: func() {
		if len(p.Snapshot().Routable) > 0 {
			sawRoutable.Store(true)
		}
	}})
	spec := worker.Spec{URL: "http://127.0.0.1:8000"}
	tests := []struct {
		name           string
		disabled, dead bool
		wantChanged    bool
		wantGates      Gate
	}{
		{"added disabled", true, false, true, GateDisabled},
		{"same again", true, false, false, GateDisabled},
		{"quarantined too", true, true, true, GateDisabled | GateDead},
		{"enabled, still dead", false, true, true, GateDead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := p.Snapshot().Version
			w, changed, err := p.UpsertFlags(spec, OriginLocal, tt.disabled, tt.dead)
			if err != nil || changed != tt.wantChanged || w.Gates() != tt.wantGates {
				t.Fatalf("changed=%v gates=%b err=%v; want changed=%v gates=%b", changed, w.Gates(), err, tt.wantChanged, tt.wantGates)
			}
			if swaps := p.Snapshot().Version - before; (swaps == 1) != tt.wantChanged || swaps > 1 {
				t.Errorf("%d snapshot swaps", swaps)
			}
		})
	}
	if sawRoutable.Load() {
		t.Error("a snapshot showed a gated worker routable")
	}
	if _, changed, _ := p.UpsertFlags(spec, OriginLocal, false, false); !changed || len(p.Snapshot().Routable) != 1 {
		t.Error("clearing both flags did not make the worker routable")
	}
}

// TestUpsertRecordDraining: a record's draining state closes GateRemoving in the same swap as
// the rest of the record, whatever the worker's health says: a worker added draining is never
// routable, a bulletin's ready does not open it, and a request in flight on it is left to end.
func TestUpsertRecordDraining(t *testing.T) {
	var p *Pool
	var sawRoutable atomic.Bool
	p = New(Config{OnChange: func() {
		if len(p.Snapshot().Routable) > 0 {
			sawRoutable.Store(true)
		}
	}})
	spec := worker.Spec{URL: "http://127.0.0.1:8000"}
	if err := spec.Normalize(); err != nil {
		t.Fatal(err)
	}
	id := spec.ID()
	w, changed := p.UpsertRecord(id, spec, OriginMesh, RecordFlags{Draining: true})
	if !changed || w.Gates() != GateRemoving {
		t.Fatalf("added draining: changed=%v gates=%b", changed, w.Gates())
	}
	if flipped, err := p.SetHealth(id, health.Ready); err != nil || flipped || len(p.Snapshot().Routable) != 0 {
		t.Errorf("a ready health opened a draining worker: flipped=%v err=%v routable=%d", flipped, err, len(p.Snapshot().Routable))
	}
	if sawRoutable.Load() {
		t.Fatal("a snapshot showed a draining worker routable")
	}

	// A worker that was routable, with a request in flight, starts draining.
	q := New(Config{})
	w, _ = q.UpsertRecord(id, spec, OriginMesh, RecordFlags{})
	w.Acquire()
	if len(q.Snapshot().Routable) != 1 {
		t.Fatal("setup: the worker is not routable")
	}
	before := q.Snapshot().Version
	same, changed := q.UpsertRecord(id, spec, OriginMesh, RecordFlags{Draining: true, Disabled: true})
	if !changed || same != w || q.Snapshot().Version != before+1 {
		t.Errorf("draining: changed=%v same worker=%v swaps=%d", changed, same == w, q.Snapshot().Version-before)
	}
	if got := q.Snapshot().Candidates(nil, 0, nil, nil); len(got) != 0 || len(q.Snapshot().Routable) != 0 {
		t.Errorf("a draining worker is still a candidate: %v", got)
	}
	if w.Inflight() != 1 || q.Get(id) != w {
		t.Errorf("the request in flight lost its worker: inflight %d", w.Inflight())
	}
	w.Release()
}

// Discovered models are listed for a worker that declares none, never replace declared ones,
// survive a spec change, and change neither routing nor the snapshot.
func TestDiscoveredModels(t *testing.T) {
	p := New(Config{})
	ws := addN(t, p, 2, func(i int, s *worker.Spec) {
		if i == 1 {
			s.Models = []string{"declared"}
		}
	})
	tests := []struct {
		name       string
		w          *Worker
		set        []string
		wantListed []string
	}{
		{"declares none, nothing discovered", ws[0], nil, nil},
		{"declares none, discovered", ws[0], []string{"m1", "m2"}, []string{"m1", "m2"}},
		{"declared wins", ws[1], []string{"other"}, []string{"declared"}},
		{"forgotten", ws[0], nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := p.Snapshot()
			if err := p.SetDiscoveredModels(tt.w.ID, tt.set); err != nil {
				t.Fatal(err)
			}
			if p.Snapshot() != before {
				t.Error("setting discovered models rebuilt the snapshot")
			}
			if got := tt.w.ListedModels(); !slices.Equal(got, tt.wantListed) {
				t.Errorf("ListedModels = %q, want %q", got, tt.wantListed)
			}
			if got := tt.w.DiscoveredModels(); !slices.Equal(got, tt.set) {
				t.Errorf("DiscoveredModels = %q, want %q", got, tt.set)
			}
			if !tt.w.ServesModel([]byte("anything")) && len(tt.w.Models) == 0 {
				t.Error("a worker that declares no model stopped taking any model")
			}
		})
	}
	in := []string{"m1"}
	if err := p.SetDiscoveredModels(ws[0].ID, in); err != nil {
		t.Fatal(err)
	}
	in[0] = "changed by the caller"
	if got := ws[0].DiscoveredModels(); !slices.Equal(got, []string{"m1"}) {
		t.Errorf("the pool kept the caller's slice: %q", got)
	}
	if !ws[0].ServesModel([]byte("m2")) {
		t.Error("discovery narrowed routing")
	}
	w2, _, err := p.Upsert(worker.Spec{URL: ws[0].URL, Labels: map[string]string{"k": "v"}}, OriginLocal)
	if err != nil || w2 == ws[0] {
		t.Fatalf("spec change: %v", err)
	}
	if got := w2.DiscoveredModels(); !slices.Equal(got, []string{"m1"}) {
		t.Errorf("after a spec change DiscoveredModels = %q, want them carried over", got)
	}
	if err := p.SetDiscoveredModels("w-000000000000", []string{"x"}); err != ErrNotFound {
		t.Errorf("unknown worker: %v, want ErrNotFound", err)
	}
}

func TestCacheTokens(t *testing.T) {
	p := New(Config{})
	w, _, err := p.Upsert(worker.Spec{URL: "http://127.0.0.1:9001"}, OriginLocal)
	if err != nil {
		t.Fatal(err)
	}
	if pr, ca := w.CacheTokens(); pr != 0 || ca != 0 {
		t.Fatalf("new worker: %d, %d", pr, ca)
	}
	w.ObserveCache(100, 60)
	w2, _, err := p.Upsert(worker.Spec{URL: w.URL, Labels: map[string]string{"k": "v"}}, OriginLocal)
	if err != nil || w2 == w {
		t.Fatalf("spec change: %v", err)
	}
	w.ObserveCache(10, 10) // an answer in flight on the replaced Worker still counts
	w2.ObserveCache(50, 0)
	if pr, ca := w2.CacheTokens(); pr != 160 || ca != 70 {
		t.Fatalf("after a spec change: %d prompt, %d cached; want 160, 70", pr, ca)
	}
	if err := p.Remove(w2.ID); err != nil {
		t.Fatal(err)
	}
	w3, _, _ := p.Upsert(worker.Spec{URL: w.URL}, OriginLocal)
	if pr, ca := w3.CacheTokens(); pr != 0 || ca != 0 {
		t.Fatalf("re-added worker starts at %d, %d", pr, ca)
	}
	if a := testing.AllocsPerRun(100, func() { w3.ObserveCache(1, 1) }); a != 0 {
		t.Fatalf("ObserveCache allocates %v times", a)
	}
	var zero Worker
	zero.ObserveCache(1, 1)
	if pr, _ := zero.CacheTokens(); pr != 0 {
		t.Fatal("a Worker made outside the pool counts")
	}
}

// A worker's predicted match counts the routing text picked for it and the part the index
// believed it held; like the cache tokens, the counts survive a spec change.
func TestPrediction(t *testing.T) {
	p := New(Config{})
	w, _, err := p.Upsert(worker.Spec{URL: "http://127.0.0.1:9001"}, OriginLocal)
	if err != nil {
		t.Fatal(err)
	}
	if text, matched := w.Prediction(); text != 0 || matched != 0 {
		t.Fatalf("new worker: %d, %d", text, matched)
	}
	w.ObservePrediction(1000, 0)
	w2, _, err := p.Upsert(worker.Spec{URL: w.URL, Labels: map[string]string{"k": "v"}}, OriginLocal)
	if err != nil || w2 == w {
		t.Fatalf("spec change: %v", err)
	}
	w2.ObservePrediction(1200, 1000)
	if text, matched := w2.Prediction(); text != 2200 || matched != 1000 {
		t.Fatalf("after a spec change: %d text, %d matched; want 2200, 1000", text, matched)
	}
	if a := testing.AllocsPerRun(100, func() { w2.ObservePrediction(1, 1) }); a != 0 {
		t.Fatalf("ObservePrediction allocates %v times", a)
	}
	var zero Worker
	zero.ObservePrediction(1, 1)
	if text, _ := zero.Prediction(); text != 0 {
		t.Fatal("a Worker made outside the pool counts")
	}
}
