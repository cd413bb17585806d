package breaker

import (
	"net/http"

	"google.golang.org/grpc/codes"
)

// HTTPStatusFromGRPC maps a gRPC status code to the HTTP status the classifier judges. The
// design fixes four: RESOURCE_EXHAUSTED → 429, UNAVAILABLE → 503, DEADLINE_EXCEEDED → 504,
// INVALID_ARGUMENT → 400. The others follow the usual gRPC-to-HTTP table (as grpc-gateway maps
// them), so that INTERNAL (500) is a failure and NOT_FOUND (404) a success, as over HTTP.
func HTTPStatusFromGRPC(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return 499 // client closed the request (nginx's convention)
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError // Unknown, Internal, DataLoss and codes unknown here
}

// ClassifyGRPC returns the outcome of a gRPC call that ended with code: the code is mapped by
// HTTPStatusFromGRPC first, then classified. CANCELED is Ignored: the caller gave up, which
// says nothing about the worker.
func (c Classifier) ClassifyGRPC(code codes.Code) Outcome {
	if code == codes.Canceled {
		return Ignored
	}
	return c.Classify(HTTPStatusFromGRPC(code))
}

// RetryableGRPC reports whether a gRPC call that ended with code has its mapped HTTP status on
// the retryable list (Retryable).
func (c Classifier) RetryableGRPC(code codes.Code) bool {
	return code != codes.Canceled && c.Retryable(HTTPStatusFromGRPC(code))
}
