package gateway

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/meshgw/meshgw/gateway/logbatch"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/reqmeta"
	"github.com/meshgw/meshgw/worker"
)

// BenchmarkRequestLog measures one route_completed record: its formatting and its hand-off to
// the log's writer, per way of formatting (through slog's handler, or by hand as meshgw does),
// format and sink. "discard" is the formatting alone; "devnull" adds one write system call per
// record to /dev/null; "file" writes to a file, as make bench's meshgw does (its stderr is a
// file); "batched-file" writes to it through a logbatch.Writer, as meshgw's request log does.
// cpu-ns/op is the process's CPU time per record (getrusage), which counts the batch's writes
// on the flushing goroutine too.
func BenchmarkRequestLog(b *testing.B) {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { devnull.Close() })
	file, err := os.Create(filepath.Join(b.TempDir(), "meshgw.log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { file.Close() })
	sinks := []struct {
		name string
		w    io.Writer
	}{{"discard", io.Discard}, {"devnull", devnull}, {"file", file}, {"batched-file", nil}}
	for _, way := range []string{"slog", "hand"} {
		for _, format := range []string{"text", "json"} {
			for _, s := range sinks {
				b.Run(way+"/"+format+"/"+s.name, func(b *testing.B) {
					w := s.w
					var lw *logbatch.Writer
					if w == nil {
						lw = logbatch.New(file, logbatch.Options{})
						defer lw.Close()
						w = lw.Batched()
					}
					cfg := Config{RequestLogger: newBenchLogger(format, w)}
					if way == "hand" {
						cfg.RequestLogWriter, cfg.RequestLogJSON = w, format == "json"
					}
					benchRequestLog(b, cfg)
					if lw != nil {
						b.ReportMetric(float64(lw.Dropped())/float64(b.N), "dropped/op")
					}
				})
			}
		}
	}
}

func newBenchLogger(format string, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// benchRequestLog logs a completed streamed chat request's record b.N times.
func benchRequestLog(b *testing.B, cfg Config) {
	g := &Gateway{cfg: cfg, log: cfg.RequestLogger, reqLog: cfg.RequestLogger}
	w := &pool.Worker{URL: "http://127.0.0.1:30001"}
	c := &call{g: g, route: reqmeta.RouteChat, start: time.Now(), lastW: w, status: 200, attempt: 1,
		reqID: []byte("mgw-0123456789abcdef-42"), meta: reqmeta.Meta{Model: []byte("llama-3-8b"), Stream: true,
			Caps: worker.CapChat | worker.CapStreaming}}
	c.touched[0] = touch{w: w}
	c.nTouch = 1
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		c.logRequest(time.Now())
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
