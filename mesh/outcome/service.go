package outcome

import (
	"errors"
	"io"
	"log/slog"
	"sync"

	"google.golang.org/grpc"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
)

// Sink records count outcomes o of worker, reported by gateway from at the epoch it knew, on
// this gateway's breaker of the worker, in order. It returns false, recording nothing, when
// this gateway does not own the worker at that epoch. It is called from the streams' goroutines,
// one run at a time per stream.
type Sink func(from, worker string, epoch uint64, o Outcome, count int) bool

// ServiceOptions configure a Service. Nil fields have the defaults given.
type ServiceOptions struct {
	// Sink receives every valid run. Required.
	Sink Sink
	// Metrics counts received and rejected reports. Default: counters on a private registry.
	Metrics *Metrics
	// Logger receives a line per stream that ends with an error. Default: slog.Default().
	Logger *slog.Logger
}

// Service is the owner's side of outcome reports: it implements meshv1.OutcomesServer.
type Service struct {
	meshv1.UnimplementedOutcomesServer
	sink      Sink
	met       *Metrics
	log       *slog.Logger
	done      chan struct{} // closed by Close: open streams end
	closeOnce sync.Once
}

// NewService returns a Service; Register serves it.
func NewService(o ServiceOptions) (*Service, error) {
	if o.Sink == nil {
		return nil, errors.New("outcome: ServiceOptions.Sink is required")
	}
	if o.Metrics == nil {
		o.Metrics = mustPrivateMetrics()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{sink: o.Sink, met: o.Metrics, log: o.Logger, done: make(chan struct{})}, nil
}

// Register serves the Outcomes service on s.
func (s *Service) Register(srv *grpc.Server) { meshv1.RegisterOutcomesServer(srv, s) }

// Close ends every open stream with its totals and refuses new ones, so that the gRPC server's
// GracefulStop does not wait for reporters' long-lived streams. Call it before GracefulStop.
func (s *Service) Close() { s.closeOnce.Do(func() { close(s.done) }) }

// Report implements meshv1.OutcomesServer: it feeds each run to the sink in arrival order and
// answers the totals when the reporter closes its side, or when the Service closes.
func (s *Service) Report(stream meshv1.Outcomes_ReportServer) error {
	batches := make(chan *meshv1.OutcomeBatch)
	recvErr := make(chan error, 1)
	go func() { // Recv in its own goroutine, so that Close ends a stream waiting for a batch
		for {
			b, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case batches <- b:
			case <-stream.Context().Done():
				return
			}
		}
	}()
	var ack meshv1.OutcomeAck
	for {
		select {
		case <-s.done:
			return stream.SendAndClose(&ack)
		default:
		}
		select {
		case b := <-batches:
			s.apply(b, &ack)
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return stream.SendAndClose(&ack)
			}
			s.log.Debug("an outcome report stream failed", "err", err)
			return err
		case <-s.done:
			return stream.SendAndClose(&ack)
		}
	}
}

// apply feeds one batch to the sink, run by run, and counts the reports.
func (s *Service) apply(b *meshv1.OutcomeBatch, ack *meshv1.OutcomeAck) {
	from := b.GetFrom()
	for _, r := range b.GetRuns() {
		n := uint64(r.GetCount())
		s.met.received.Add(float64(n))
		if s.accept(from, r) {
			ack.Accepted += n
		} else {
			ack.Rejected += n
			s.met.rejected.Add(float64(n))
		}
	}
}

// accept checks one run and hands it to the sink (a failure with timed_out as TimedOut). A run
// without a worker, with an outcome that is not success or failure, or with a count outside 1..MaxRunCount is rejected unread.
func (s *Service) accept(from string, r *meshv1.OutcomeRun) bool {
	o, n := fromProto(r.GetOutcome(), r.GetTimedOut()), r.GetCount()
	if r.GetWorkerId() == "" || !o.valid() || n < 1 || n > MaxRunCount {
		return false
	}
	return s.sink(from, r.GetWorkerId(), r.GetEpoch(), o, int(n))
}
