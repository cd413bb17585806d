package breaker

// NoResponse is the status to classify when the worker sent no response at all (connection
// error, timeout): it is a failure, and it is retryable.
const NoResponse = 0

// NoResponseInTime is the status to classify when the worker sent nothing (not even a response
// header) within the request timeout: a NoResponse whose outcome is TimedOut, which the hang
// rule counts (hang.go).
const NoResponseInTime = -1

// The default status lists, SMG's: capacity_status_codes [429] and retryable_status_codes
// [408, 429, 500, 502, 503, 504].
var (
	defaultCapacity  = newStatusSet(DefaultCapacityStatusCodes())
	defaultRetryable = newStatusSet(DefaultRetryableStatusCodes())
)

// DefaultCapacityStatusCodes returns a fresh copy of the default capacity_status_codes.
func DefaultCapacityStatusCodes() []int { return []int{429} }

// DefaultRetryableStatusCodes returns a fresh copy of the default retryable_status_codes.
func DefaultRetryableStatusCodes() []int { return []int{408, 429, 500, 502, 503, 504} }

// Classifier turns a worker's answer into the Outcome its breaker records. The zero value uses
// the default lists. A Classifier is immutable and safe for concurrent use; classifying
// allocates nothing. The gateway's retry loop does not ask it: a worker's
// retryable_status_codes classifies outcomes only, and every worker is retried on the same
// statuses (SMG's semantics, despite the list's name).
type Classifier struct {
	capacity  *statusSet // nil: defaultCapacity
	retryable *statusSet // nil: defaultRetryable
}

// NewClassifier returns a classifier for the given capacity and retryable status lists. An
// empty list means the default list; a non-empty list replaces it. Codes outside 100..599 are
// not HTTP statuses and are skipped (worker.Spec.Normalize rejects them earlier).
func NewClassifier(capacity, retryable []int) Classifier {
	var c Classifier
	if len(capacity) > 0 {
		s := newStatusSet(capacity)
		c.capacity = &s
	}
	if len(retryable) > 0 {
		s := newStatusSet(retryable)
		c.retryable = &s
	}
	return c
}

// Classify returns the outcome of an answer with HTTP status status, or of no answer at all
// when status is NoResponse (any value below 100):
//
//   - no response within the request timeout (NoResponseInTime): TimedOut;
//   - any other no response: Failure;
//   - a capacity status: Ignored;
//   - a retryable status that is not a capacity status: Failure;
//   - anything else, 2xx or a status on neither list (400, 404…): Success.
//
// A shed by the gateway itself (admission, no_available_workers) never reached a worker and
// must not be recorded at all.
func (c Classifier) Classify(status int) Outcome {
	switch {
	case status == NoResponseInTime:
		return TimedOut
	case status < 100:
		return Failure
	case c.capacitySet().has(status):
		return Ignored
	case c.retryableSet().has(status):
		return Failure
	}
	return Success
}

// ClassifyAttempt is Classify of how one request to the worker ended, as the gateway reports
// it: status is the worker's answer, and connErr says the worker sent none or broke off, which
// counts as NoResponse unless status already says NoResponseInTime.
func (c Classifier) ClassifyAttempt(status int, connErr bool) Outcome {
	if connErr && status != NoResponseInTime {
		status = NoResponse
	}
	return c.Classify(status)
}

// Retryable reports whether status (or NoResponse) is on the retryable list: no response, or a
// status on the list (capacity statuses such as 429 included, when the list has them). It
// describes the list; the gateway does not decide its retries with it.
func (c Classifier) Retryable(status int) bool {
	return status < 100 || c.retryableSet().has(status)
}

// CapacityStatusCodes returns the capacity list in effect, in ascending order.
func (c Classifier) CapacityStatusCodes() []int { return c.capacitySet().codes() }

// RetryableStatusCodes returns the retryable list in effect, in ascending order.
func (c Classifier) RetryableStatusCodes() []int { return c.retryableSet().codes() }

func (c Classifier) capacitySet() *statusSet {
	if c.capacity == nil {
		return &defaultCapacity
	}
	return c.capacity
}

func (c Classifier) retryableSet() *statusSet {
	if c.retryable == nil {
		return &defaultRetryable
	}
	return c.retryable
}

// statusSet is a bitset of the HTTP statuses 0..639: one bit test per lookup, no allocation.
type statusSet [10]uint64

func newStatusSet(codes []int) statusSet {
	var s statusSet
	for _, c := range codes {
		if c >= 100 && c <= 599 {
			s[c>>6] |= 1 << (c & 63)
		}
	}
	return s
}

func (s *statusSet) has(code int) bool {
	return uint(code) < 64*uint(len(s)) && s[code>>6]&(1<<(code&63)) != 0
}

func (s *statusSet) codes() []int {
	var out []int
	for c := 100; c <= 599; c++ {
		if s.has(c) {
			out = append(out, c)
		}
	}
	return out
}
