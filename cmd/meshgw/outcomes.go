package main

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/mesh/outcome"
	"github.com/meshgw/meshgw/worker"
)

// outcomeReporter is what the router needs of an outcome.Reporter.
type outcomeReporter interface {
	Report(owner, worker string, epoch uint64, o outcome.Outcome)
}

// maxCachedClassifiers bounds the router's classifier cache: a replaced worker leaves its entry
// behind, so the cache is emptied when it grows past this many.
const maxCachedClassifiers = 4096

// outcomeRouter sends the outcome of each request proxied to a worker owned by another gateway
// to that worker's owner (DESIGN.md section 4). Workers this gateway owns are recorded by the
// owned-worker manager, not here. Plug OnOutcome into gateway.Config.OnOutcome next to the
// manager's.
type outcomeRouter struct {
	rep outcomeReporter
	// classifiers caches a worker's classifier by its *worker.Resilience: a pool.Worker's spec
	// never changes (a changed spec replaces the worker), so the pointer names the lists.
	classifiers sync.Map // *worker.Resilience → breaker.Classifier
	cached      atomic.Int64
}

func newOutcomeRouter(rep outcomeReporter) *outcomeRouter { return &outcomeRouter{rep: rep} }

// OnOutcome classifies a request's outcome on w with w's own status lists, as its owner's
// breaker would (NoResponse when connErr, unless the status says NoResponseInTime), and reports
// a success, a failure or a timeout to w's owner at the epoch of w's record. It skips workers
// not imported from another gateway, workers with no owner yet, and outcomes that are nothing
// (a capacity status).
func (r *outcomeRouter) OnOutcome(w *pool.Worker, status int, connErr bool) {
	if w == nil || w.Origin != pool.OriginMesh {
		return
	}
	owner, epoch := w.OwnerEpoch()
	if owner == "" {
		return
	}
	if connErr && status != breaker.NoResponseInTime {
		status = breaker.NoResponse
	}
	var o outcome.Outcome
	switch r.classifier(w.Resilience()).Classify(status) {
	case breaker.Success:
		o = outcome.Success
	case breaker.Failure:
		o = outcome.Failure
	case breaker.TimedOut:
		o = outcome.TimedOut
	default:
		return
	}
	r.rep.Report(owner, string(w.ID), epoch, o)
}

// classifier returns the classifier of a worker's resilience block; the default one for nil.
func (r *outcomeRouter) classifier(res *worker.Resilience) breaker.Classifier {
	if res == nil {
		return breaker.Classifier{}
	}
	if c, ok := r.classifiers.Load(res); ok {
		return c.(breaker.Classifier)
	}
	_, c := breaker.Resolve(breaker.DefaultConfig(), res)
	if r.cached.Add(1) > maxCachedClassifiers {
		r.classifiers.Clear()
		r.cached.Store(1)
	}
	r.classifiers.Store(res, c)
	return c
}

// remoteRecorder is what the outcome sink needs of the owned-worker manager (*owned.Manager).
type remoteRecorder interface {
	RecordRemote(id worker.ID, epoch uint64, o breaker.Outcome, n int) bool
}

// outcomeSink is the owner's side: each run another gateway reports goes to the owned worker's
// breaker, refused when this gateway does not own the worker at the run's epoch.
func outcomeSink(rec remoteRecorder) outcome.Sink {
	return func(_, id string, epoch uint64, o outcome.Outcome, n int) bool {
		bo := breaker.Success
		switch o {
		case outcome.Failure:
			bo = breaker.Failure
		case outcome.TimedOut:
			bo = breaker.TimedOut
		}
		return rec.RecordRemote(worker.ID(id), epoch, bo, n)
	}
}

// outcomeReports is a gateway's part in outcome reports: the reporter and its router for
// workers owned elsewhere, and the service for the workers it owns. They share one
// meshgw_mesh_outcome_reports_total.
type outcomeReports struct {
	reporter *outcome.Reporter
	router   *outcomeRouter
	service  *outcome.Service
}

// newOutcomeReports builds the reporter (owners' addresses from resolve, dialled with dial; nil
// means plaintext) and the service
// (runs recorded through rec); register the service on the gRPC server before it serves.
func newOutcomeReports(nodeID string, resolve func(string) (string, bool), dial []grpc.DialOption, rec remoteRecorder,
	reg prometheus.Registerer, log *slog.Logger) (*outcomeReports, error) {
	met, err := outcome.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	svc, err := outcome.NewService(outcome.ServiceOptions{Sink: outcomeSink(rec), Metrics: met, Logger: log})
	if err != nil {
		return nil, err
	}
	rep, err := outcome.NewReporter(outcome.Config{From: nodeID, Resolve: resolve, DialOptions: dial, Metrics: met, Logger: log})
	if err != nil {
		return nil, err
	}
	return &outcomeReports{reporter: rep, router: newOutcomeRouter(rep), service: svc}, nil
}

// close ends the service's open streams (call it before the gRPC server's GracefulStop) and
// stops the reporter after a last flush.
func (o *outcomeReports) close() {
	o.service.Close()
	o.reporter.Close()
}
