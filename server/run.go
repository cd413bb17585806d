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

// Run serves until ctx ends or a listener fails, then stops: with
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
	select {
	case <-ctx.Done():
	case err := <-s.errc:
		if err != nil {
			s.log.Error("listener failed; shutting down", "err", err)
		}
	}
	if s.cfg.Cluster.LeaveOnTerminate && ctx.Err() != nil {
		s.cl.leaveOnTerminate(s.operator, s.gw, s.left, s.cfg.Cluster.DrainTimeout)
	}
	err := shutdown(s.gw, s.metricsSrv, s.cfg.ShutdownGrace, s.log)
	s.cl.leave() // then the stops: registrations, reconciler, checks, and the cluster's shutdown
	s.log.Info("stopped")
	s.stop()
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

// startProbes opens Config.ProbeAddr when set.
func (s *Server) startProbes() (string, error) {
	addr := s.cfg.ProbeAddr
	if addr == "" {
		return "", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("cannot listen on --health-check-port %s: %v", addr, err)
	}
	go func() { s.errc <- s.gw.ServeProbes(ln) }()
	return ln.Addr().String(), nil
}

// startMetrics serves /metrics from the registry with net/http when Config.MetricsAddr is set.
func (s *Server) startMetrics() (*http.Server, string, error) {
	addr := s.cfg.MetricsAddr
	if addr == "" {
		return nil, "", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("cannot listen on --prometheus-port %s: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	mountPprof(mux, s.cfg.Pprof)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- err
		}
	}()
	return srv, ln.Addr().String(), nil
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
