package consensus

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// hclogBridge is an hclog.Logger that writes to a slog.Logger, so that raft's own lines land in
// the gateway's structured log. Lines below the bridge's level are dropped before any work;
// raft is chatty at INFO (every election, every snapshot), so the node's default is WARN.
type hclogBridge struct {
	log     *slog.Logger
	name    string
	level   *atomic.Int32 // an hclog.Level, shared by every logger derived from this one
	implied []any
}

var _ hclog.Logger = (*hclogBridge)(nil)

func newHCLogBridge(logger *slog.Logger, min slog.Level) *hclogBridge {
	lv := new(atomic.Int32)
	lv.Store(int32(hclogLevel(min)))
	return &hclogBridge{log: logger, name: "raft", level: lv}
}

// hclogLevel maps a slog level to the nearest hclog level at or below it.
func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l < slog.LevelDebug:
		return hclog.Trace
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	}
	return hclog.Error
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (b *hclogBridge) enabled(l hclog.Level) bool {
	min := hclog.Level(b.level.Load())
	return min != hclog.Off && l >= min
}

// msgSkipOldLog is the WARN raft writes at every start of a node whose log store tracks the
// commit index: trackedLogs reports nothing to replay, because the node applied the committed
// entries itself (replay.go). Expected, so it is logged at DEBUG.
const msgSkipOldLog = "skipping application of old log"

func (b *hclogBridge) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	if level == hclog.Warn && msg == msgSkipOldLog {
		level = hclog.Debug
	}
	if !b.enabled(level) {
		return
	}
	attrs := make([]any, 0, 2+len(b.implied)+len(args))
	attrs = append(attrs, "component", b.name)
	attrs = append(attrs, b.implied...)
	attrs = append(attrs, args...)
	b.log.Log(context.Background(), slogLevel(level), msg, attrs...)
}

func (b *hclogBridge) Trace(msg string, args ...any) { b.Log(hclog.Trace, msg, args...) }
func (b *hclogBridge) Debug(msg string, args ...any) { b.Log(hclog.Debug, msg, args...) }
func (b *hclogBridge) Info(msg string, args ...any)  { b.Log(hclog.Info, msg, args...) }
func (b *hclogBridge) Warn(msg string, args ...any)  { b.Log(hclog.Warn, msg, args...) }
func (b *hclogBridge) Error(msg string, args ...any) { b.Log(hclog.Error, msg, args...) }

func (b *hclogBridge) IsTrace() bool { return b.enabled(hclog.Trace) }
func (b *hclogBridge) IsDebug() bool { return b.enabled(hclog.Debug) }
func (b *hclogBridge) IsInfo() bool  { return b.enabled(hclog.Info) }
func (b *hclogBridge) IsWarn() bool  { return b.enabled(hclog.Warn) }
func (b *hclogBridge) IsError() bool { return b.enabled(hclog.Error) }

func (b *hclogBridge) ImpliedArgs() []any { return b.implied }

func (b *hclogBridge) With(args ...any) hclog.Logger {
	c := *b
	c.implied = append(append([]any(nil), b.implied...), args...)
	return &c
}

func (b *hclogBridge) Name() string { return b.name }

func (b *hclogBridge) Named(name string) hclog.Logger {
	c := *b
	c.name = b.name + "." + name
	return &c
}

func (b *hclogBridge) ResetNamed(name string) hclog.Logger {
	c := *b
	c.name = name
	return &c
}

func (b *hclogBridge) SetLevel(level hclog.Level) { b.level.Store(int32(level)) }

func (b *hclogBridge) GetLevel() hclog.Level { return hclog.Level(b.level.Load()) }

func (b *hclogBridge) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(b.StandardWriter(opts), "", 0)
}

func (b *hclogBridge) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return &stdWriter{b: b, level: level}
}

// stdWriter turns lines of the standard log package into bridge lines, honouring a
// "[LEVEL]" prefix when there is one.
type stdWriter struct {
	b     *hclogBridge
	level hclog.Level
}

func (w *stdWriter) Write(p []byte) (int, error) {
	msg := string(bytes.TrimRight(p, "\r\n"))
	level := w.level
	for prefix, l := range map[string]hclog.Level{
		"[TRACE]": hclog.Trace, "[DEBUG]": hclog.Debug, "[INFO]": hclog.Info,
		"[WARN]": hclog.Warn, "[ERR]": hclog.Error, "[ERROR]": hclog.Error,
	} {
		if rest, ok := strings.CutPrefix(msg, prefix); ok {
			level, msg = l, strings.TrimSpace(rest)
			break
		}
	}
	w.b.Log(level, msg)
	return len(p), nil
}
