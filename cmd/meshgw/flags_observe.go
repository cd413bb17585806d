package main

import (
	"cmp"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/gateway/logbatch"
)

// observeFlags are logging and metrics.
type observeFlags struct {
	logLevel       string
	logFormat      string
	prometheusPort int
	prometheusHost string
	requestLog     bool
}

// defaultRequestLog is --request-log's default: off. Its records are formatted by hand and
// batched (under 1 µs of CPU each in isolation), but issue 26 puts it on by default only if
// meshgw holds 0.9 of the bare fasthttp proxy with it on, and it does not: under load the log
// costs 5-10 % of plain-request throughput on a 2-core host (docs/performance.md, "The request
// log").
const defaultRequestLog = false

func (f *observeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.logLevel, "log-level", "info", "least severe level logged: "+logLevelNames)
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fs.BoolVar(&f.requestLog, "request-log", defaultRequestLog, "log one route_completed or route_rejected record per model request at INFO (request id, worker, path, stream, capabilities, status, duration, outcome), written in batches every 5 ms (off by default: it costs 5-10 % of throughput at tens of thousands of requests/s)")
	fs.IntVar(&f.prometheusPort, "prometheus-port", 29000, "port of /metrics (0 = off)")
	fs.StringVar(&f.prometheusHost, "prometheus-host", "", "address /metrics (and --enable-pprof) listens on (default: --host)")
}

func (f *observeFlags) validate() error {
	lvl, ok := logLevels[strings.ToLower(f.logLevel)]
	if !ok {
		return valuef("log-level", "%q is not one of %s", f.logLevel, logLevelNames)
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

// logs are the process log and the request log, which share one output: the request log's
// records are batched and written every logbatch.DefaultInterval (dropped and counted when the
// output falls behind); every other line is written at once, after the records batched before
// it. close writes what is batched: every way out of the process goes through it.
type logs struct {
	out    *logbatch.Writer
	log    *slog.Logger
	reqLog *slog.Logger // says whether the request log's level (INFO) is logged
	reqOut io.Writer    // where the gateway writes the request log's records, formatted by hand
	json   bool         // in --log-format json
}

// logs opens the logs on w (stderr).
func (f *observeFlags) logs(w io.Writer) *logs {
	out := logbatch.New(w, logbatch.Options{})
	return &logs{out: out, log: f.logger(out), reqLog: f.logger(out.Batched()), reqOut: out.Batched(),
		json: f.logFormat == "json"}
}

// register exports the count of request log records dropped.
func (l *logs) register(reg prometheus.Registerer) error {
	return reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "meshgw_request_log_dropped_total",
		Help: "Request log records dropped because the log's output fell behind.",
	}, func() float64 { return float64(l.out.Dropped()) }))
}

// close writes the batched records and makes later ones go out at once.
func (l *logs) close() { _ = l.out.Close() }

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
