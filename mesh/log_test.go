package mesh

import (
	"log/slog"
	"testing"

	"github.com/meshgw/meshgw/test/logbuf"
)

func TestParseLogLine(t *testing.T) {
	for _, tt := range []struct {
		line  string
		level slog.Level
		msg   string
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:5", slog.LevelDebug, "Stream connection from=127.0.0.1:5"},
		{"[INFO] memberlist: Marking n2 as failed", slog.LevelInfo, "Marking n2 as failed"},
		{"[WARN] memberlist: Refuting a suspect message", slog.LevelWarn, "Refuting a suspect message"},
		{"[ERR] memberlist: Failed push/pull merge: x", slog.LevelError, "Failed push/pull merge: x"},
		{"[ERR] Failed to shutdown transport: x", slog.LevelError, "Failed to shutdown transport: x"},
		{"no prefix at all", slog.LevelInfo, "no prefix at all"},
	} {
		level, msg := parseLogLine(tt.line)
		if level != tt.level || msg != tt.msg {
			t.Errorf("%q: %v %q, want %v %q", tt.line, level, msg, tt.level, tt.msg)
		}
	}
}

// TestStdLoggerBridge: memberlist's lines reach slog at their own level, below-level lines are
// dropped.
func TestStdLoggerBridge(t *testing.T) {
	buf := new(logbuf.Buffer)
	l := newStdLogger(buf.Logger(slog.LevelInfo))
	l.Printf("[DEBUG] memberlist: Stream connection from=127.0.0.1:1")
	l.Printf("[WARN] memberlist: Refuting a suspect message (from: n2)")
	l.Printf("[ERR] memberlist: Push/Pull with n3 failed: EOF")
	if got := buf.Lines("Stream connection"); len(got) != 0 {
		t.Errorf("a DEBUG line passed an INFO logger: %q", got)
	}
	if got := buf.Lines("level=WARN", "component=memberlist", `msg="Refuting a suspect message (from: n2)"`); len(got) != 1 {
		t.Errorf("the WARN line: %q", buf.String())
	}
	if got := buf.Lines("level=ERROR", `msg="Push/Pull with n3 failed: EOF"`); len(got) != 1 {
		t.Errorf("the ERR line: %q", buf.String())
	}
}
