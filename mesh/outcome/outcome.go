package outcome

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
)

// Outcome is what one request did to a worker, as the reporting gateway classified it (DESIGN.md
// section 7). The caller maps its breaker's outcome to it; an outcome that is nothing (a capacity
// status, a shed) is never reported.
type Outcome uint8

// The outcomes a report carries. The zero value is not one of them: Report skips it.
const (
	// Success resets the owner's consecutive failure count.
	Success Outcome = iota + 1
	// Failure counts towards opening the owner's circuit.
	Failure
	// TimedOut is a Failure whose request got no answer at all (not even a response header)
	// within the request timeout; the owner's hang rule counts it too. On the wire it is
	// OUTCOME_FAILURE with timed_out set, so that an owner that does not know the flag still
	// counts a failure.
	TimedOut
)

var outcomeNames = [...]string{0: "unspecified", Success: "success", Failure: "failure", TimedOut: "timed_out"}

// String returns "success", "failure", "timed_out", or "unspecified" for the zero value.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// valid reports whether o is Success, Failure or TimedOut.
func (o Outcome) valid() bool { return o == Success || o == Failure || o == TimedOut }

// proto returns the wire value of o and its timed_out flag.
func (o Outcome) proto() (meshv1.Outcome, bool) {
	switch o {
	case Success:
		return meshv1.Outcome_OUTCOME_SUCCESS, false
	case Failure:
		return meshv1.Outcome_OUTCOME_FAILURE, false
	case TimedOut:
		return meshv1.Outcome_OUTCOME_FAILURE, true
	}
	return meshv1.Outcome_OUTCOME_UNSPECIFIED, false
}

// fromProto returns the Outcome of a wire value and its timed_out flag, 0 (invalid) for any
// other than success and failure. The flag makes a failure TimedOut; on a success it means
// nothing.
func fromProto(o meshv1.Outcome, timedOut bool) Outcome {
	switch o {
	case meshv1.Outcome_OUTCOME_SUCCESS:
		return Success
	case meshv1.Outcome_OUTCOME_FAILURE:
		if timedOut {
			return TimedOut
		}
		return Failure
	}
	return 0
}

// MaxRunCount is the largest count of one run. A reporter starts a new run past it; an owner
// rejects a run above it, so that one message cannot make it record without bound.
const MaxRunCount = 1 << 16

// The results of meshgw_mesh_outcome_reports_total.
const (
	// ResultSent counts reports handed to an owner's stream (reporter side).
	ResultSent = "sent"
	// ResultDropped counts reports never sent: the owner's queue was full, its address unknown,
	// or its stream down (reporter side).
	ResultDropped = "dropped"
	// ResultReceived counts every report received from a peer, accepted or not (owner side).
	ResultReceived = "received"
	// ResultRejected counts the received reports the owner refused: it does not own the worker
	// at that epoch, or the run was malformed (owner side).
	ResultRejected = "rejected"
)

// Metrics is meshgw_mesh_outcome_reports_total{result}, counted in reports (the sum of run
// counts), not runs. One Metrics serves a gateway's Reporter and Service together.
type Metrics struct {
	sent, dropped, received, rejected prometheus.Counter
}

// NewMetrics registers the counter on reg, its four results published at zero. reg nil: a
// private registry (the series are kept but not exported).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshgw_mesh_outcome_reports_total",
		Help: "Outcome reports of requests proxied to workers owned by another gateway, by result: " +
			"sent and dropped by this gateway as reporter, received and rejected by it as owner.",
	}, []string{"result"})
	if err := reg.Register(v); err != nil {
		return nil, errors.Join(errors.New("outcome: register metrics"), err)
	}
	return &Metrics{
		sent: v.WithLabelValues(ResultSent), dropped: v.WithLabelValues(ResultDropped),
		received: v.WithLabelValues(ResultReceived), rejected: v.WithLabelValues(ResultRejected),
	}, nil
}

func mustPrivateMetrics() *Metrics {
	m, err := NewMetrics(nil)
	if err != nil {
		panic(err) // a fresh registry cannot hold the series already
	}
	return m
}
