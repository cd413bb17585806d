package main

import (
	"math"
	"runtime/debug"
	"runtime/metrics"

	"github.com/spf13/pflag"
)

// runtimeFlags tune the Go runtime's garbage collector and expose its profiler. The data plane
// barely allocates per request (docs/performance.md), so the collector's defaults serve it well;
// the flags are for operators who bound the process's memory or profile it in place.
type runtimeFlags struct {
	gcPercent     int
	memoryLimitMB int
	enablePprof   bool
	fs            *pflag.FlagSet // to tell a value given from a default
}

const (
	flagGCPercent   = "gc-percent"
	flagMemoryLimit = "memory-limit-mb"
	flagPprof       = "enable-pprof"
)

func (f *runtimeFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.IntVar(&f.gcPercent, flagGCPercent, 100, "Go garbage collector target: heap growth in percent of the live heap before a collection; when not given, $GOGC or 100")
	fs.IntVar(&f.memoryLimitMB, flagMemoryLimit, 0, "soft limit of the Go runtime's memory in MiB: the collector runs more often near it (0 = none); when not given, $GOMEMLIMIT or none")
	fs.BoolVar(&f.enablePprof, flagPprof, false, "serve Go's profiler at /debug/pprof/ on the Prometheus listener (needs --prometheus-port; anyone who reaches that listener can profile the process)")
}

func (f *runtimeFlags) validate() error {
	if err := checkMin(flagGCPercent, f.gcPercent, 1); err != nil {
		return err
	}
	if f.memoryLimitMB > math.MaxInt64>>20 {
		return valuef(flagMemoryLimit, "%d is above the maximum %d", f.memoryLimitMB, int64(math.MaxInt64>>20))
	}
	return checkMin(flagMemoryLimit, f.memoryLimitMB, 0)
}

// apply sets the collector's target and memory limit that were given, leaving the runtime's own
// ($GOGC, $GOMEMLIMIT) in force otherwise. It returns what is now in force (a memory limit of
// math.MaxInt64 is none).
func (f *runtimeFlags) apply() (gcPercent, memoryLimit int64) {
	if f.given(flagGCPercent) {
		debug.SetGCPercent(f.gcPercent)
	}
	if f.given(flagMemoryLimit) {
		limit := int64(math.MaxInt64)
		if f.memoryLimitMB > 0 {
			limit = int64(f.memoryLimitMB) << 20
		}
		debug.SetMemoryLimit(limit)
	}
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64())
}

func (f *runtimeFlags) given(name string) bool { return f.fs != nil && f.fs.Changed(name) }
