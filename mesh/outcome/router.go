package outcome

import (
	"sync"
	"sync/atomic"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/worker"
)

// ReportQueue is what a Router needs of a Reporter: Report queues an outcome on a worker for
// its owner at an epoch.
type ReportQueue interface {
	Report(owner, worker string, epoch uint64, o Outcome)
}

// maxCachedClassifiers bounds a Router's classifier cache: a replaced worker leaves its entry
// behind, so the cache is emptied when it grows past this many.
const maxCachedClassifiers = 4096

// Router is the reporting gateway's side (contract step 1): it classifies the outcome of a
// request proxied to a worker owned by another gateway, as that worker's owner would, and
// reports it to the owner through a ReportQueue. It is safe for concurrent use.
type Router struct {
	q ReportQueue
	// classifiers caches a worker's classifier by its *worker.Resilience: the block a pointer
	// points to never changes (a changed spec comes with a new block), so the pointer names the
	// lists.
	classifiers sync.Map // *worker.Resilience → breaker.Classifier
	cached      atomic.Int64
}

// NewRouter returns a Router reporting to q (a *Reporter in a gateway).
func NewRouter(q ReportQueue) *Router { return &Router{q: q} }

// Route classifies a request's outcome on worker id with the worker's own status lists res (nil:
// the defaults), as its owner's breaker would: status is what the worker answered, connErr that
// it gave no answer, which classifies as breaker.NoResponse unless status is
// breaker.NoResponseInTime. A success, a failure or a timeout is reported to owner at epoch, the
// epoch of the worker's record; nothing (a capacity status) is not, nor is any outcome when owner
// is "" (the worker has no owner yet). The caller routes here only workers owned by another
// gateway, and never modifies res afterwards: its classifier is cached by the pointer.
func (r *Router) Route(owner string, id worker.ID, epoch uint64, res *worker.Resilience, status int, connErr bool) {
	if owner == "" {
		return
	}
	if o := classify(r.classifier(res), status, connErr); o != 0 {
		r.q.Report(owner, string(id), epoch, o)
	}
}

// classify returns the Outcome c gives a request that ended with status (connErr: no answer),
// 0 for an outcome that is nothing.
func classify(c breaker.Classifier, status int, connErr bool) Outcome {
	switch c.ClassifyAttempt(status, connErr) {
	case breaker.Success:
		return Success
	case breaker.Failure:
		return Failure
	case breaker.TimedOut:
		return TimedOut
	}
	return 0
}

// classifier returns the classifier of a worker's resilience block; the default one for nil.
func (r *Router) classifier(res *worker.Resilience) breaker.Classifier {
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

// RemoteRecorder is what an owner's Sink needs of its owned-worker manager: RecordRemote records
// n runs of outcome o on the breaker of worker id, and returns false, recording nothing, when
// this gateway does not own the worker at epoch.
type RemoteRecorder interface {
	RecordRemote(id worker.ID, epoch uint64, o breaker.Outcome, n int) bool
}

// SinkTo returns the owner's Sink (contract step 6): each run another gateway reports goes to
// the owned worker's breaker through r as the breaker.Outcome it stands for, refused when r
// does not own the worker at the run's epoch.
func SinkTo(r RemoteRecorder) Sink {
	return func(_, id string, epoch uint64, o Outcome, n int) bool {
		bo := breaker.Success
		switch o {
		case Failure:
			bo = breaker.Failure
		case TimedOut:
			bo = breaker.TimedOut
		}
		return r.RecordRemote(worker.ID(id), epoch, bo, n)
	}
}
