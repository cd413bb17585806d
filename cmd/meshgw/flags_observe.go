package main

import (
	"cmp"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// observeFlags are logging and metrics.
type observeFlags struct {
	logLevel       string
	logFormat      string
	prometheusPort int
	prometheusHost string
	requestLog     bool
}

// defaultRequestLog is --request-log's default: off, because on it cost more than a tenth of the
// data plane's throughput (docs/performance.md, "The request log").
const defaultRequestLog = false

func (f *observeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.logLevel, "log-level", "info", "least severe level logged: "+logLevelNames)
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fs.BoolVar(&f.requestLog, "request-log", defaultRequestLog, "log one route_completed or route_rejected record per model request at INFO (request id, worker, path, stream, capabilities, status, duration, outcome); off by default for its cost (docs/performance.md)")
	fs.IntVar(&f.prometheusPort, "prometheus-port", 29000, "port of /metrics (0 = off)")
	fs.StringVar(&f.prometheusHost, "prometheus-host", "", "address /metrics (and --enable-pprof) listens on (default: --host)")
}

func (f *observeFlags) validate() error {
	lvl, ok := logLevels[strings.ToLower(f.logLevel)]
	if !ok {
		return usagef("--log-level %q is not one of %s", f.logLevel, logLevelNames)
	}
	f.logLevel = lvl
	if err := checkOneOf("log-format", f.logFormat, []string{"text", "json"}); err != nil {
		return err
	}
	if err := checkHost("prometheus-host", f.prometheusHost); err != nil {
		return err
	}
	return checkPort("prometheus-port", f.prometheusPort, true)
}

func (f *observeFlags) logger(w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(f.logLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	if f.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// metricsAddr is the metrics listener's host:port: on --prometheus-host, else on host (--host),
// so that a data plane kept on loopback does not expose its metrics and profiler beyond it.
func (f *observeFlags) metricsAddr(host string) string {
	return net.JoinHostPort(cmp.Or(f.prometheusHost, host), strconv.Itoa(f.prometheusPort))
}
