// Command meshgw is the gateway daemon: it parses flags (each also read from $MESHGW_<NAME>),
// translates them into a server.Config (config.go), runs the gateway package server
// assembles, reloads certificates and gossip keys on SIGHUP, and drains gracefully on SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/server"
	"github.com/meshgw/meshgw/version"
)

func main() {
	// raft's snapshot store creates files 0644 and folders 0755 less the umask; the worker
	// records in them hold api_keys, so they are made 0600/0700 (storage's doc).
	syscall.Umask(0o077)
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// options holds every flag group.
type options struct {
	gw      gatewayFlags
	cache   cacheAwareFlags
	loc     localityFlags
	retry   retryFlags
	health  healthFlags
	breaker breakerFlags
	state   stateFlags
	cluster clusterFlags
	observe observeFlags
	runtime runtimeFlags
	tls     tlsFlags
	disc    discoveryFlags
}

// groups lists the groups in the order they validate: tls last, since it judges where the
// others make raft and gRPC listen.
func (o *options) groups() []flagGroup {
	o.cluster.gw, o.cluster.state = &o.gw, &o.state
	o.tls.cluster, o.tls.nodeID = &o.cluster, &o.gw.nodeID
	o.disc.health, o.disc.cluster = &o.health, &o.cluster
	return []flagGroup{&o.gw, &o.cache, &o.loc, &o.retry, &o.health, &o.breaker, &o.disc, &o.state, &o.cluster, &o.observe, &o.runtime, &o.tls}
}

// run is main without the process: exit 0 after a clean stop, 1 when the gateway cannot run,
// 2 on a bad command line (one line on stderr).
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return runContext(ctx, args, getenv, stdout, stderr)
}

// runContext runs until ctx ends (a signal), then shuts down gracefully.
func runContext(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var o options
	fs := newFlagSet(o.groups())
	if err := parseFlags(fs, o.groups(), args, getenv); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printHelp(stdout, fs)
			return 0
		}
		if errors.Is(err, errVersion) {
			fmt.Fprintln(stdout, version.Line("meshgw"))
			return 0
		}
		fmt.Fprintf(stderr, "meshgw: %s\n", oneLine(err.Error()))
		return 2
	}
	lg := o.observe.logs(stderr)
	defer lg.close()
	log := lg.log
	gcPercent, memLimit := o.runtime.apply()
	o.gw.memoryLimit = memLimit
	log.Debug("go runtime", "gc_percent", gcPercent, "memory_limit_bytes", memLimit)
	if o.runtime.enablePprof && o.observe.prometheusPort == 0 {
		log.Warn("--enable-pprof has no effect: --prometheus-port is 0")
	}
	if w := o.cache.ignored(o.gw.policy); w != "" {
		log.Warn(w)
	}
	if err := serve(ctx, &o, getenv, lg); err != nil {
		fmt.Fprintf(lg.out, "meshgw: %s\n", oneLine(err.Error())) // after the batched records
		return 1
	}
	return 0
}

// serve runs the gateway (package server) until ctx ends: it opens the data plane's listener,
// translates the flags into the server's Config, hands SIGHUP to the server's Reload, starts
// the server and runs it until ctx ends, when it shuts down gracefully.
func serve(ctx context.Context, o *options, getenv func(string) string, lg *logs) error {
	ln, err := net.Listen("tcp", o.gw.listenAddr())
	if err != nil {
		return fmt.Errorf("cannot listen on --host/--port %s: %v", o.gw.listenAddr(), err)
	}
	defer ln.Close()
	reg := prometheus.NewRegistry()
	srv, err := server.New(o.serverConfig(ln, getenv, lg, reg))
	if err != nil {
		return err
	}
	// SIGHUP is handled from before the cluster starts, so that a SIGHUP meanwhile reloads the
	// certificates rather than ending the process. Server.Reload is safe from New on: it
	// reloads the gossip keys once the mesh started (server/reload.go), so nothing here holds
	// the cluster.
	defer onHangup(srv.Reload)()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := lg.register(reg); err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	return srv.Run(ctx)
}

// onHangup calls reload on each SIGHUP until the returned stop is called, one at a time.
// Without TLS or a gossip key file a SIGHUP only logs that there is nothing to reload (it no
// longer ends the process).
func onHangup(reload func()) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-hup:
				reload()
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-finished
	}
}
