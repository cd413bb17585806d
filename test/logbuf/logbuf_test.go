package logbuf

import (
	"log/slog"
	"slices"
	"sync"
	"testing"
)

func TestBuffer(t *testing.T) {
	var b Buffer
	log := b.Logger(slog.LevelInfo)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { log.Info("worker health changed", "to", "ready") })
	}
	wg.Wait()
	log.Debug("probe ok")
	if n := len(b.Lines("worker health changed", "to=ready")); n != 8 {
		t.Fatalf("%d matching lines, want 8:\n%s", n, b.String())
	}
	if got := b.Lines("probe ok"); !slices.Equal(got, nil) {
		t.Fatalf("a debug line passed an info logger: %q", got)
	}
}
