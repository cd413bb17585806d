package server

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/mesh/outcome"
)

// outcomeReports is a gateway's part in outcome reports: the reporter and its router for
// workers owned elsewhere, and the service for the workers it owns. They share one
// meshgw_mesh_outcome_reports_total.
type outcomeReports struct {
	reporter *outcome.Reporter
	router   *outcome.Router
	service  *outcome.Service
}

// newOutcomeReports builds the reporter (owners' addresses from resolve, dialled with dial; nil
// means plaintext) and the service (runs recorded through rec); register the service on the
// gRPC server before it serves.
func newOutcomeReports(nodeID string, resolve func(string) (string, bool), dial []grpc.DialOption, rec outcome.RemoteRecorder,
	reg prometheus.Registerer, log *slog.Logger) (*outcomeReports, error) {
	met, err := outcome.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	svc, err := outcome.NewService(outcome.ServiceOptions{Sink: outcome.SinkTo(rec), Metrics: met, Logger: log})
	if err != nil {
		return nil, err
	}
	rep, err := outcome.NewReporter(outcome.Config{From: nodeID, Resolve: resolve, DialOptions: dial, Metrics: met, Logger: log})
	if err != nil {
		return nil, err
	}
	return &outcomeReports{reporter: rep, router: outcome.NewRouter(rep), service: svc}, nil
}

// onOutcome hands a request's outcome on w to the router when w was imported from another
// gateway, with w's owner and epoch and its status lists; it skips any other worker. It has
// gateway.Config.OnOutcome's signature; the workers this gateway owns go to the owned-worker
// manager instead.
func (o *outcomeReports) onOutcome(w *pool.Worker, status int, connErr bool) {
	if w == nil || w.Origin != pool.OriginMesh {
		return
	}
	owner, epoch := w.OwnerEpoch()
	o.router.Route(owner, w.ID, epoch, w.Resilience(), status, connErr)
}

// close ends the service's open streams (call it before the gRPC server's GracefulStop) and
// stops the reporter after a last flush.
func (o *outcomeReports) close() {
	o.service.Close()
	o.reporter.Close()
}
