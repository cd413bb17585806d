package consensus

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/meshgw/meshgw/test/testkit"
)

func TestHCLogBridge(t *testing.T) {
	tests := []struct {
		name  string
		min   slog.Level
		write func(l hclog.Logger)
		want  []string // substrings of the output, in order; nil: no output
	}{
		{"info dropped at warn", slog.LevelWarn, func(l hclog.Logger) { l.Info("entering leader state") }, nil},
		{"warn passes", slog.LevelWarn, func(l hclog.Logger) { l.Warn("heartbeat timeout", "peer", "n2") },
			[]string{"level=WARN", "heartbeat timeout", "component=raft", "peer=n2"}},
		{"named and with", slog.LevelWarn, func(l hclog.Logger) { l.Named("snapshots").With("k", "v").Error("disk full") },
			[]string{"level=ERROR", "disk full", "component=raft.snapshots", "k=v"}},
		{"debug at debug", slog.LevelDebug, func(l hclog.Logger) { l.Debug("rpc") }, []string{"level=DEBUG", "rpc"}},
		{"trace dropped at debug", slog.LevelDebug, func(l hclog.Logger) { l.Trace("rpc") }, nil},
		{"trace at trace", slog.LevelDebug - 4, func(l hclog.Logger) { l.Trace("rpc") }, []string{"level=DEBUG", "rpc"}},
		{"standard logger infers the level", slog.LevelWarn,
			func(l hclog.Logger) { l.StandardLogger(nil).Print("[ERR] raft-net: failed to accept") },
			[]string{"level=ERROR", "raft-net: failed to accept"}},
		{"standard logger info dropped", slog.LevelWarn,
			func(l hclog.Logger) { l.StandardLogger(nil).Print("[INFO] hello") }, nil},
		{"the start's skipped replay is debug", slog.LevelWarn,
			func(l hclog.Logger) { l.Warn("skipping application of old log", "index", 0) }, nil},
		{"set level off", slog.LevelWarn, func(l hclog.Logger) { l.SetLevel(hclog.Off); l.Error("x") }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf logBuffer
			l := newHCLogBridge(buf.Logger(slog.LevelDebug), tt.min)
			tt.write(l)
			out := buf.String()
			if tt.want == nil && out != "" {
				t.Fatalf("want no output, got %q", out)
			}
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("%q not found in order in %q", w, out)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestHCLogLevels(t *testing.T) {
	l := newHCLogBridge(testkit.Quiet(), slog.LevelWarn)
	if l.IsInfo() || !l.IsWarn() || !l.IsError() || l.GetLevel() != hclog.Warn {
		t.Fatalf("warn bridge: info %v warn %v error %v level %v", l.IsInfo(), l.IsWarn(), l.IsError(), l.GetLevel())
	}
	named := l.Named("x")
	l.SetLevel(hclog.Debug)
	if !named.IsDebug() {
		t.Fatal("a derived logger does not share the level")
	}
}
