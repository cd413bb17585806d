package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/meshgw/meshgw/gateway"
	"github.com/meshgw/meshgw/gateway/fleet"
	"github.com/meshgw/meshgw/worker"
)

// Run serves until ctx ends, a listener fails, or the gateway cannot join the mesh for good
// (its node id is a live gateway's, or --join names gateways of another raft cluster: Run then
// returns that error, and the gateway sends no leave), then stops: with
// ClusterConfig.LeaveOnTerminate and ctx ended, the gateway first drains (ownership's
// LeaveOnTerminate); then the data plane drains its requests within Config.ShutdownGrace, the
// gateway leaves the mesh, and everything Start started stops, last first: the registrations,
// the reconciler, the weight updates, the fleet cache and outcome reports (before the gRPC
// listener's graceful stop), the owned-worker manager, the publisher, the writer (before raft),
// then the cluster. A failed listener is logged, not returned. Call it once, after a
// successful Start.
func (s *Server) Run(ctx context.Context) error {
	if !s.started {
		return errNotStarted
	}
	var fatal error
	select {
	case <-ctx.Done():
	case err := <-s.errc:
		if err != nil {
			s.log.Error("listener failed; shutting down", "err", err)
		}
	case fatal = <-s.cl.fatal:
	}
	if s.cfg.Cluster.LeaveOnTerminate && ctx.Err() != nil && fatal == nil {
		s.cl.leaveOnTerminate(s.operator, s.gw, s.left, s.cfg.Cluster.DrainTimeout)
	}
	err := shutdown(s.gw, s.metricsSrv, s.cfg.ShutdownGrace, s.log)
	if fatal == nil {
		// A gateway that could not join has nothing to leave; and one whose node id is another's
		// must not send a leave, which would speak for that gateway's name.
		s.cl.leave()
	}
	s.log.Info("stopped") // then the stops: registrations, reconciler, checks, and the cluster's shutdown
	s.stop()
	if fatal != nil {
		return fatal
	}
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

// registerWorkers registers the configured workers through raft in the background, so the
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

// bindListeners opens Config.ProbeAddr and Config.MetricsAddr, those set, before anything
// starts: a port in use stops the start before it joined anything (Start). startDataPlane
// serves them.
func (s *Server) bindListeners() error {
	var err error
	if s.probeLn, err = listen("--health-check-port", s.cfg.ProbeAddr); err != nil {
		return err
	}
	if s.metricsLn, err = listen("--prometheus-port", s.cfg.MetricsAddr); err != nil {
		return errors.Join(err, closeListener(s.probeLn))
	}
	s.onStop(func() { _ = closeListener(s.probeLn); _ = closeListener(s.metricsLn) }) // served, they are closed already
	return nil
}

// listen opens addr, the listener of flag; nil without addr.
func listen(flag, addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s %s: %v", flag, addr, err)
	}
	return ln, nil
}

// closeListener closes ln when there is one.
func closeListener(ln net.Listener) error {
	if ln == nil {
		return nil
	}
	return ln.Close()
}

// serveProbes serves the probe endpoints on the probe listener, if there is one, and returns
// its address.
func (s *Server) serveProbes() string {
	if s.probeLn == nil {
		return ""
	}
	ln := s.probeLn
	go func() { s.errc <- s.gw.ServeProbes(ln) }()
	return ln.Addr().String()
}

// serveMetrics serves /metrics from the registry with net/http on the metrics listener, if
// there is one, and returns its server and address.
func (s *Server) serveMetrics() (*http.Server, string) {
	if s.metricsLn == nil {
		return nil, ""
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	mountPprof(mux, s.cfg.Pprof)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ln := s.metricsLn
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- err
		}
	}()
	return srv, ln.Addr().String()
}

// mountPprof serves Go's profiler on mux when on; never /debug/pprof/cmdline, since a command
// line may hold the admin key.
func mountPprof(mux *http.ServeMux, on bool) {
	if !on {
		return
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
