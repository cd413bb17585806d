package gateway

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/worker"
)

// TestOnReadinessTellsEachFlipInOrder: OnReadiness hears the first state, then each flip of
// /readiness and nothing else (meshgw's grpc.health.v1 follows it).
func TestOnReadinessTellsEachFlipInOrder(t *testing.T) {
	var mu sync.Mutex
	var got []bool
	g, err := New(Config{Logger: slog.New(slog.DiscardHandler), ShutdownSettle: -1, OnReadiness: func(ready bool) {
		mu.Lock()
		got = append(got, ready)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	seen := func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	if g.Ready() || !slices.Equal(seen(), []bool{false}) {
		t.Fatalf("at start: ready %v, told %v", g.Ready(), seen())
	}
	w, _, err := g.Pool().Upsert(worker.Spec{URL: "http://127.0.0.1:9"}, pool.OriginLocal)
	if err != nil {
		t.Fatal(err)
	}
	g.refreshReadiness() // as the loop does: no flip, nothing told
	if !g.Ready() || !slices.Equal(seen(), []bool{false, true}) {
		t.Fatalf("with a worker: ready %v, told %v", g.Ready(), seen())
	}
	if _, err := g.Pool().SetFlags(w.ID, true, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, true, false}; !slices.Equal(seen(), want) {
		t.Errorf("told %v, want %v", seen(), want)
	}
}
