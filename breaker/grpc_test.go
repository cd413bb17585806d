package breaker

import (
	"testing"

	"google.golang.org/grpc/codes"
)

func TestGRPCMapping(t *testing.T) {
	var c Classifier
	tests := []struct {
		code      codes.Code
		status    int
		outcome   Outcome
		retryable bool
	}{
		// The four the design fixes.
		{codes.ResourceExhausted, 429, Ignored, true},
		{codes.Unavailable, 503, Failure, true},
		{codes.DeadlineExceeded, 504, Failure, true},
		{codes.InvalidArgument, 400, Success, false},
		// The rest of the usual table.
		{codes.OK, 200, Success, false},
		{codes.Canceled, 499, Ignored, false}, // the caller gave up: nothing about the worker
		{codes.Unknown, 500, Failure, true},
		{codes.NotFound, 404, Success, false},
		{codes.AlreadyExists, 409, Success, false},
		{codes.PermissionDenied, 403, Success, false},
		{codes.FailedPrecondition, 400, Success, false},
		{codes.Aborted, 409, Success, false},
		{codes.OutOfRange, 400, Success, false},
		{codes.Unimplemented, 501, Success, false},
		{codes.Internal, 500, Failure, true},
		{codes.DataLoss, 500, Failure, true},
		{codes.Unauthenticated, 401, Success, false},
		{codes.Code(99), 500, Failure, true},
	}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			if got := HTTPStatusFromGRPC(tt.code); got != tt.status {
				t.Errorf("HTTPStatusFromGRPC = %d, want %d", got, tt.status)
			}
			if got := c.ClassifyGRPC(tt.code); got != tt.outcome {
				t.Errorf("ClassifyGRPC = %v, want %v", got, tt.outcome)
			}
			if got := c.RetryableGRPC(tt.code); got != tt.retryable {
				t.Errorf("RetryableGRPC = %v, want %v", got, tt.retryable)
			}
		})
	}
}

// The mapping comes first, then the worker's own lists: with capacity [503], UNAVAILABLE is a
// capacity answer and records nothing.
func TestGRPCUsesWorkerLists(t *testing.T) {
	c := NewClassifier([]int{503}, nil)
	if got := c.ClassifyGRPC(codes.Unavailable); got != Ignored {
		t.Fatalf("ClassifyGRPC(UNAVAILABLE) with capacity [503] = %v, want ignored", got)
	}
	if got := c.ClassifyGRPC(codes.ResourceExhausted); got != Failure {
		t.Fatalf("ClassifyGRPC(RESOURCE_EXHAUSTED) with capacity [503] = %v, want failure", got)
	}
}
