package fleet

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestPassLog: a pass with up to bulkLines changes logs each at INFO; a bulk pass logs one
// summary line with a count per kind and a few ids, and each change only at debug level.
func TestPassLog(t *testing.T) {
	tests := []struct {
		name      string
		changes   int
		level     slog.Level
		wantInfo  int
		wantDebug int
		summary   bool
	}{
		{"nothing", 0, slog.LevelInfo, 0, 0, false},
		{"a few", bulkLines, slog.LevelInfo, bulkLines, 0, false},
		{"a bulk", 40_000, slog.LevelInfo, 1, 0, true},
		{"a bulk at debug level", 50, slog.LevelDebug, 1, 50, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			p := newPassLog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tt.level})))
			for i := range tt.changes {
				kind := "added"
				if i%2 == 1 {
					kind = "removed"
				}
				p.add(kind, fmt.Sprintf("w-%d", i), "worker "+kind, "id", i)
			}
			p.flush()
			info, debug := strings.Count(buf.String(), "level=INFO"), strings.Count(buf.String(), "level=DEBUG")
			if info != tt.wantInfo || debug != tt.wantDebug {
				t.Errorf("%d INFO and %d DEBUG lines, want %d and %d:\n%.2000s", info, debug, tt.wantInfo, tt.wantDebug, buf.String())
			}
			if got := strings.Contains(buf.String(), "applied a bulk of worker changes"); got != tt.summary {
				t.Fatalf("summary line %v, want %v", got, tt.summary)
			}
			if tt.summary {
				want := fmt.Sprintf("changes=%d added=%d removed=%d for_example=\"[w-0 w-1 w-2]\"", tt.changes, (tt.changes+1)/2, tt.changes/2)
				if !strings.Contains(buf.String(), want) {
					t.Errorf("summary lacks %q:\n%s", want, buf.String())
				}
			}
		})
	}
}

// TestLineBudget: bulkLines lines a second pass; the rest are counted and summarised in one
// line when the second is over, after which lines pass again.
func TestLineBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		b := &lineBudget{log: slog.New(slog.NewTextHandler(&buf, nil)), what: "test lines"}
		allowed := 0
		for range 100 {
			if b.allow() {
				allowed++
			}
		}
		if allowed != bulkLines {
			t.Fatalf("%d of 100 lines allowed at once, want %d", allowed, bulkLines)
		}
		time.Sleep(lineWindow)
		synctest.Wait()
		if want := fmt.Sprintf("not_shown=%d", 100-bulkLines); !strings.Contains(buf.String(), want) {
			t.Fatalf("no summary with %s after the window:\n%s", want, buf.String())
		}
		if !b.allow() {
			t.Error("a line after the summary was held back")
		}
	})
}

// syncBuffer is a bytes.Buffer safe for the timer's goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
