// Command meshgw is the gateway daemon: it parses flags (each also read from $MESHGW_<NAME>),
// starts the data plane, the probe and metrics listeners, and drains gracefully on SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/gateway"
	"github.com/meshgw/meshgw/gateway/admin"
	"github.com/meshgw/meshgw/gateway/fleet"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/ownership"
	"github.com/meshgw/meshgw/version"
	"github.com/meshgw/meshgw/worker"
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
	retry   retryFlags
	health  healthFlags
	breaker breakerFlags
	state   stateFlags
	cluster clusterFlags
	observe observeFlags
	runtime runtimeFlags
	tls     tlsFlags
}

// groups lists the groups in the order they validate: tls last, since it judges where the
// others make raft and gRPC listen.
func (o *options) groups() []flagGroup {
	o.cluster.gw, o.cluster.state = &o.gw, &o.state
	o.tls.cluster, o.tls.nodeID, o.tls.adminKey = &o.cluster, &o.gw.nodeID, &o.gw.adminAPIKey
	return []flagGroup{&o.gw, &o.cache, &o.retry, &o.health, &o.breaker, &o.state, &o.cluster, &o.observe, &o.runtime, &o.tls}
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
	if err := serve(ctx, &o, getenv, lg); err != nil {
		fmt.Fprintf(lg.out, "meshgw: %s\n", oneLine(err.Error())) // after the batched records
		return 1
	}
	return 0
}

// serve wires and runs the gateway until ctx ends: the cluster first (the raft node with the
// durable worker records, the mesh, forwarding), then the worker pool and what drives it (the
// bulletin importer and publisher, the owned-worker manager), the gRPC services, then the data
// plane serving the pool what raft has applied, while the command line's workers are
// registered through raft in the background. On the way out: the data plane drains, the
// gateway leaves the mesh, then everything stops.
func serve(ctx context.Context, o *options, getenv func(string) string, lg *logs) error {
	log := lg.log
	ln, err := net.Listen("tcp", o.gw.listenAddr())
	if err != nil {
		return fmt.Errorf("cannot listen on --host/--port %s: %v", o.gw.listenAddr(), err)
	}
	defer ln.Close()
	nodeID := o.gw.nodeID
	if nodeID == "" {
		nodeID = nodeIDOf(ln.Addr())
	}
	if err := o.tls.checkNodeID(nodeID); err != nil {
		return err
	}
	o.tls.self = nodeID
	if w := o.tls.warning(); w != "" {
		log.Warn(w)
	}
	// The SIGHUP goroutine runs from before the cluster starts, so that a SIGHUP meanwhile
	// reloads the certificates rather than ending the process; it reloads the gossip keys of
	// the cluster from when hupCluster holds it on.
	var hupCluster atomic.Pointer[cluster]
	defer o.tls.reloadOnHangup(log, func(l *slog.Logger) {
		if c := hupCluster.Load(); c != nil {
			o.cluster.reloadGossipKeys(c.mesh, l)
		}
	})()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := lg.register(reg); err != nil {
		return err
	}
	cl, err := startCluster(o, nodeID, ln.Addr(), getenv, reg, log)
	if err != nil {
		return err
	}
	hupCluster.Store(cl)
	defer cl.shutdown()
	node := cl.node
	// Writes go to the leader, from whichever gateway they reach.
	writer := &fleet.Writer{Node: cl.fwd, NodeID: nodeID, Logger: log}
	defer writer.Close() // removals still waiting for raft end before raft stops
	cfg := o.gw.config(nodeID, &o.retry)
	cfg.Pool = pool.New(pool.Config{StartPending: o.health.startPending()})
	// Bulletins: the importer applies other owners' state to the pool; the publisher gossips the
	// state of the workers this gateway owns, as the manager tells it what changed.
	importer := fleet.NewImporter(fleet.ImporterConfig{NodeID: nodeID, Pool: cfg.Pool, Heard: cl.mesh.Heard,
		DroppedEpoch: cl.mesh.DroppedEpoch, Logger: log})
	publisher := fleet.NewPublisher(cl.mesh, cfg.Pool, nil, log)
	defer publisher.Close()
	// The owner's breakers judge hangs by this gateway's request timeout (breaker/hang.go).
	bcfg := o.breaker.config()
	bcfg.HangTimeout = cfg.RequestTimeout
	mgr, err := owned.New(owned.Options{Pool: cfg.Pool, NodeID: nodeID, Health: o.health.cfg,
		Breaker: bcfg, Registerer: reg, Logger: log, OnRemove: writer.OnRemove,
		OnChange: publisher.Changed, OnForget: publisher.Forgotten, Seed: importer.Seed, OnDisown: importer.ImportDisowned})
	if err != nil {
		return err
	}
	defer mgr.Close()
	publisher.Start(mgr)
	// Outcome reports: the service takes other gateways' outcomes for the workers this one owns;
	// the reporter sends the outcomes of workers owned elsewhere to their owners, at the gRPC
	// address the mesh publishes.
	outcomes, err := newOutcomeReports(nodeID, cl.resolveRPC, o.tls.dialOptions(), mgr, reg, log)
	if err != nil {
		return err
	}
	defer outcomes.close() // before the gRPC listener's graceful stop, which waits for open streams
	// cache_aware's fleet-wide index and load: served for the workers this gateway owns,
	// subscribed from every peer.
	fc, err := newFleetCache(o, nodeID, cfg.Pool, func(id worker.ID) bool { _, ok := mgr.Status(id); return ok },
		func() []string { return livePeers(cl.mesh, nodeID) }, cl.resolveRPC, o.tls.dialOptions(), reg, log)
	if err != nil {
		return err
	}
	defer fc.close()
	gh := newGRPCHealth()
	cl.serve(outcomes.service.Register, gh.register, fc.register)
	cfg.CacheAware = o.cache.config()
	cfg.CacheFleet = fc.gatewayConfig()
	cfg.Registerer, cfg.Logger = reg, log
	cfg.Quorum, cfg.Security = node.HasLeader, o.tls.status()
	cfg.RequestLog, cfg.RequestLogger = o.observe.requestLog, lg.reqLog
	cfg.RequestLogWriter, cfg.RequestLogJSON = lg.reqOut, lg.json
	cfg.OnReadiness = gh.set
	cfg.OnOutcome = func(w *pool.Worker, status int, connErr bool) {
		if w.Origin == pool.OriginMesh {
			outcomes.onOutcome(w, status, connErr)
			return
		}
		mgr.OnOutcome(w, status, connErr)
	}
	operator := ownership.NewOperator(ownership.OperatorConfig{Records: node, Membership: cl.owners, Apply: writer,
		Metrics: cl.handoffs, Logger: log})
	cfg.Admin = admin.Config{Records: node, Writer: writer, Fleet: cl.acks, Raft: cl, Runtime: mgr, Imports: importer, Peers: cl,
		Ownership: operator, Drainer: operator, Drains: cl, DrainTimeout: o.cluster.drainTimeoutDuration(),
		DrainSettle: func(s worker.Spec) time.Duration { return o.health.cfg.Merge(s.ConnectionMode, s.Health).DrainSettle },
		Journal:     node}
	stopWeights, err := startWeights(o, nodeID, node, writer, cl, reg, log, &cfg.Admin)
	if err != nil {
		return err
	}
	defer stopWeights()
	gw, err := gateway.New(cfg)
	if err != nil {
		return err
	}
	if err := reg.Register(importer.Collector()); err != nil {
		gw.Close()
		return err
	}
	cl.mesh.SetBulletinReceiver(importer)
	fc.start()
	reconciler := fleet.New(fleet.Config{NodeID: nodeID, Records: node, Pool: cfg.Pool, Owner: mgr, Imports: importer,
		CaughtUp: cl.caughtUp, AppliedIndex: node.AppliedIndex, AppliedSignal: node.AppliedSignal, Logger: log})
	reconciler.Start()
	cl.acks.SetLocal(reconciler)
	defer reconciler.Stop()
	restoreImports(importer, node, log)
	defer fleet.KeepImports(importer, node, 0, log)()
	cl.startPoolLoops(cfg.Pool)
	left := make(chan struct{})
	cl.goLoop("drain duty", func() { cl.drainDuty(gw, left) })
	defer registerWorkers(writer, o.registrations(), log)()
	errc := make(chan error, 3)
	go func() { errc <- gw.Serve(o.tls.httpListener(ln)) }()
	probeAddr, err := startProbes(o, gw, errc)
	if err != nil {
		gw.Close()
		return err
	}
	metricsSrv, metricsAddr, err := startMetrics(o, reg, errc)
	if err != nil {
		gw.Close()
		return err
	}
	log.Info("meshgw started", "listen", ln.Addr().String(), "probe_listen", probeAddr, "metrics_listen", metricsAddr,
		"raft", node.Address(), "mesh", cl.mesh.Addr(), "rpc", cl.rpcAddr, "node_id", nodeID, "region", o.gw.region, "color", o.gw.color,
		"workers", len(o.gw.specs), "policy", o.gw.policy, "tls", o.tls.enabled(), "tls_http", o.tls.enabled() && o.tls.http,
		"max_buffered_body_mb", cfg.MaxBufferedBody>>20)
	select {
	case <-ctx.Done():
	case err := <-errc:
		if err != nil {
			log.Error("listener failed; shutting down", "err", err)
		}
	}
	if o.cluster.leaveOnTerminate && ctx.Err() != nil {
		cl.leaveOnTerminate(operator, gw, left, o.cluster.drainTimeoutDuration())
	}
	err = shutdown(gw, metricsSrv, time.Duration(o.gw.shutdownGrace)*time.Second, log)
	cl.leave() // then the deferred stops: registrations, reconciler, checks, and cl.shutdown
	log.Info("stopped")
	return err
}

// restoreImports routes the imported workers by the state saved before a restart until their
// owners are heard again (fail-static: a gateway restarted alone, its peers down, still serves
// them). It runs after the reconciler's first pass, so that the records are in the pool.
func restoreImports(im *fleet.Importer, store fleet.ImportStore, log *slog.Logger) {
	n, err := im.Restore(store)
	switch {
	case err != nil:
		log.Warn("cannot read the imported state saved before the restart; imported workers wait for their owners' bulletins", "err", err)
	case n > 0:
		log.Info("routing imported workers by the state saved before the restart until their owners are heard", "workers", n)
	}
}

// registrations are the workers of --worker-urls and --worker-config as this gateway registers
// them: in its region unless the spec names one (a registration's default, DESIGN.md section 2).
func (o *options) registrations() []worker.Spec {
	out := make([]worker.Spec, 0, len(o.gw.specs))
	for _, s := range o.gw.specs {
		s = s.Clone()
		if s.Region == "" {
			s.Region = o.gw.region
		}
		out = append(out, s)
	}
	return out
}

// registerWorkers registers the command line's workers through raft in the background, so the
// data plane serves at once from what raft has applied (fail-static). The returned function
// stops the registration and waits for it.
func registerWorkers(w *fleet.Writer, specs []worker.Spec, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in background goroutine", "goroutine", "register workers", "panic", r, "stack", string(debug.Stack()))
			}
		}()
		w.RegisterAll(ctx, specs)
	}()
	return func() { cancel(); <-done }
}

func shutdown(gw *gateway.Gateway, metricsSrv *http.Server, grace time.Duration, log *slog.Logger) error {
	log.Info("shutting down", "grace", grace)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := gw.Shutdown(ctx)
	if metricsSrv != nil {
		_ = metricsSrv.Close()
	}
	if err != nil {
		log.Warn("in-flight requests did not drain within the grace period", "err", err)
	}
	log.Info("data plane stopped")
	return nil
}

// startProbes opens --health-check-port when set.
func startProbes(o *options, gw *gateway.Gateway, errc chan<- error) (string, error) {
	if o.gw.healthCheckPort == 0 {
		return "", nil
	}
	addr := net.JoinHostPort(o.gw.host, strconv.Itoa(o.gw.healthCheckPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("cannot listen on --health-check-port %s: %v", addr, err)
	}
	go func() { errc <- gw.ServeProbes(ln) }()
	return ln.Addr().String(), nil
}

// startMetrics serves /metrics from reg with net/http when --prometheus-port is set.
func startMetrics(o *options, reg *prometheus.Registry, errc chan<- error) (*http.Server, string, error) {
	if o.observe.prometheusPort == 0 {
		return nil, "", nil
	}
	ln, err := net.Listen("tcp", o.observe.metricsAddr(o.gw.host))
	if err != nil {
		return nil, "", fmt.Errorf("cannot listen on --prometheus-port %s: %v", o.observe.metricsAddr(o.gw.host), err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	o.runtime.mountPprof(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	return srv, ln.Addr().String(), nil
}

// nodeIDOf is the default node id: the listener's host_port.
func nodeIDOf(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host + "_" + port
}
