package mesh

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strings"
)

// logWriter turns the lines memberlist writes through its *log.Logger into slog records.
// memberlist starts each line with its level ("[DEBUG] memberlist: Stream connection ..."); the
// prefix picks the slog level and is dropped with the "memberlist: " that follows it. A line
// without a known prefix is logged at INFO. log.Logger serializes calls to Write.
type logWriter struct {
	log *slog.Logger
}

// newStdLogger returns the *log.Logger memberlist is given.
func newStdLogger(l *slog.Logger) *log.Logger {
	return log.New(&logWriter{log: l.With("component", "memberlist")}, "", 0)
}

// levels maps memberlist's line prefixes to slog levels, most frequent first.
var levels = [...]struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG]", slog.LevelDebug},
	{"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn},
	{"[ERR]", slog.LevelError},
	{"[ERROR]", slog.LevelError},
	{"[TRACE]", slog.LevelDebug},
}

func (w *logWriter) Write(p []byte) (int, error) {
	level, msg := parseLogLine(string(bytes.TrimRight(p, "\r\n")))
	if w.log.Enabled(context.Background(), level) {
		w.log.Log(context.Background(), level, msg)
	}
	return len(p), nil
}

// parseLogLine splits a memberlist log line into its level and message.
func parseLogLine(line string) (slog.Level, string) {
	level := slog.LevelInfo
	for _, l := range levels {
		if rest, ok := strings.CutPrefix(line, l.prefix); ok {
			level, line = l.level, rest
			break
		}
	}
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "memberlist: ")
	return level, line
}
