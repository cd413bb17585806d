package pool

import (
	"slices"
	"testing"

	"github.com/meshgw/meshgw/worker"
)

// Snapshot.External follows the external workers through additions, replacements, removals and
// a deferred batch, and FailOpen picks among them past their health and breaker, never past an
// operator's gate.
func TestExternalWorkersAndFailOpen(t *testing.T) {
	p := New(Config{StartPending: true})
	ext := func(url, model string) worker.Spec {
		return worker.Spec{URL: url, ConnectionMode: worker.ModeExternal, Provider: "openai", Model: model}
	}
	ids := func() []string {
		var out []string
		for _, w := range p.Snapshot().External {
			out = append(out, string(w.ID))
		}
		return out
	}
	a, _, _ := p.Upsert(ext("https://a.example.test/v1", "m1"), OriginLocal)
	b, _, _ := p.Upsert(ext("https://b.example.test/v1", "m2"), OriginLocal)
	addN(t, p, 3, nil) // engines are never in External
	want := []string{string(a.ID), string(b.ID)}
	slices.Sort(want)
	if got := ids(); !slices.Equal(got, want) {
		t.Fatalf("External = %v, want %v", got, want)
	}
	b2, _, _ := p.Upsert(ext("https://b.example.test/v1", "m3"), OriginLocal) // replaced
	if got := p.Snapshot().External; len(got) != 2 || !slices.Contains(got, b2) || slices.Contains(got, b) {
		t.Fatalf("after a replacement External = %v", ids())
	}
	flush := p.Defer()
	_ = p.Remove(a.ID)
	c, _, _ := p.Upsert(ext("https://c.example.test", ""), OriginLocal)
	flush()
	want = []string{string(b2.ID), string(c.ID)}
	slices.Sort(want)
	if got := ids(); !slices.Equal(got, want) {
		t.Fatalf("after a deferred batch External = %v, want %v", got, want)
	}

	br := &fakeBreaker{}
	br.open.Store(true)
	_ = p.SetBreaker(c.ID, br)
	snap := p.Snapshot()
	if got := snap.FailOpen(nil, worker.CapChat, []byte("m3"), nil); !slices.Equal(got, []*Worker{b2, c}) && !slices.Equal(got, []*Worker{c, b2}) {
		t.Fatalf("FailOpen(m3) = %v, want the pending b2 and the open c", got)
	}
	if got := snap.FailOpen(nil, worker.CapChat, []byte("m3"), c); len(got) != 1 || got[0] != b2 {
		t.Fatalf("FailOpen avoiding c = %v, want b2", got)
	}
	if !snap.ExternalRoute(worker.CapChat, []byte("m3")) || !snap.ExternalRoute(worker.CapChat, []byte("other")) {
		t.Fatal("c serves any model: every model has an external route")
	}
	_, _ = p.SetFlags(c.ID, true, false)
	_, _ = p.SetFlags(b2.ID, false, true)
	if got := p.Snapshot().FailOpen(nil, worker.CapChat, []byte("m3"), nil); len(got) != 0 {
		t.Fatalf("FailOpen crossed an operator's gate: %v", got)
	}
}
