//go:build unix

package usage

import (
	"syscall"
	"testing"
	"time"
)

// cpuPerOp reports the process's CPU time per iteration (cpu-ns/op) beside the wall-clock
// ns/op, which a shared, loaded machine inflates by the time the benchmark waits for a core.
func cpuPerOp(b *testing.B, f func()) {
	b.Helper()
	start := cpuTime()
	n := 0
	for b.Loop() {
		f()
		n++
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(n), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
