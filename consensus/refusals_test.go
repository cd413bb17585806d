package consensus

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRefusalsAreSpaced: the first refusal is logged, the next ones within refusalLogEvery are
// counted, and the line after says how many were not logged.
func TestRefusalsAreSpaced(t *testing.T) {
	var logs logBuffer
	log := logs.Logger(slog.LevelWarn)
	var r refusals
	for range 3 {
		r.warn(log, "refused", "remote", "127.0.0.1:1")
	}
	if got := logs.Lines("refused"); len(got) != 1 || !strings.Contains(got[0], "refusals_not_logged=0") {
		t.Fatalf("after three refusals at once: %q", got)
	}
	r.last.Store(time.Now().Add(-refusalLogEvery - time.Second).UnixNano()) // as if the interval passed
	r.warn(log, "refused", "remote", "127.0.0.1:2")
	if got := logs.Lines("refused"); len(got) != 2 || !strings.Contains(got[1], "refusals_not_logged=2") {
		t.Fatalf("after the interval: %q", got)
	}
}
