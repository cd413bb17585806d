// Package logbuf is a log sink for tests: it collects what a logger writes, safely for
// concurrent writers, so that a test can search it (for a state change, or for a secret that
// must never appear).
package logbuf

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// Buffer collects log output. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the lines written so far that contain every one of subs.
func (b *Buffer) Lines(subs ...string) []string {
	var out []string
	for line := range strings.SplitSeq(strings.TrimRight(b.String(), "\n"), "\n") {
		ok := line != ""
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// Logger returns a text logger writing to b at level and above.
func (b *Buffer) Logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: level}))
}
