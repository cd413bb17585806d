package breaker

import (
	"strconv"
	"testing"

	"google.golang.org/grpc/codes"
)

func TestClassifyDefaults(t *testing.T) {
	var c Classifier // the zero value uses the default lists
	tests := []struct {
		status    int
		want      Outcome
		retryable bool
	}{
		{200, Success, false},
		{204, Success, false},
		{302, Success, false},
		{400, Success, false},
		{404, Success, false},
		{408, Failure, true},
		{429, Ignored, true},
		{500, Failure, true},
		{501, Success, false},
		{502, Failure, true},
		{503, Failure, true},
		{504, Failure, true},
		{NoResponse, Failure, true},
		{NoResponseInTime, TimedOut, true},
		{-2, Failure, true},
		{700, Success, false},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			if got := c.Classify(tt.status); got != tt.want {
				t.Errorf("Classify(%d) = %v, want %v", tt.status, got, tt.want)
			}
			if got := c.Retryable(tt.status); got != tt.retryable {
				t.Errorf("Retryable(%d) = %v, want %v", tt.status, got, tt.retryable)
			}
		})
	}
}

// TestClassifyAttempt: an answer is classified by its status; no answer is a failure, or
// TimedOut when it is the request timeout's NoResponseInTime, whatever status came with it.
func TestClassifyAttempt(t *testing.T) {
	var c Classifier
	for _, tt := range []struct {
		status  int
		connErr bool
		want    Outcome
	}{
		{200, false, Success},
		{503, false, Failure},
		{429, false, Ignored},
		{NoResponse, true, Failure},
		{NoResponseInTime, true, TimedOut},
		{200, true, Failure}, // headers came, then the connection broke
		{429, true, Failure},
	} {
		if got := c.ClassifyAttempt(tt.status, tt.connErr); got != tt.want {
			t.Errorf("ClassifyAttempt(%d, %v) = %v, want %v", tt.status, tt.connErr, got, tt.want)
		}
	}
}

func TestClassifyCustomLists(t *testing.T) {
	c := NewClassifier([]int{503, 42, 900}, []int{502, 503, 1 << 20})
	tests := []struct {
		status    int
		want      Outcome
		retryable bool
	}{
		{503, Ignored, true},  // capacity wins over retryable
		{502, Failure, true},  // retryable, not capacity
		{500, Success, false}, // the user's list replaced the default
		{429, Success, false}, // so did the capacity list
		{42, Failure, true},   // below 100: no response, whatever the list says
		{900, Success, false}, // out-of-range codes were skipped
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			if got := c.Classify(tt.status); got != tt.want {
				t.Errorf("Classify(%d) = %v, want %v", tt.status, got, tt.want)
			}
			if got := c.Retryable(tt.status); got != tt.retryable {
				t.Errorf("Retryable(%d) = %v, want %v", tt.status, got, tt.retryable)
			}
		})
	}
}

func TestDefaultListsAreCopies(t *testing.T) {
	DefaultRetryableStatusCodes()[0] = 200
	DefaultCapacityStatusCodes()[0] = 200
	var c Classifier
	if c.Classify(200) != Success || c.Classify(408) != Failure || c.Classify(429) != Ignored {
		t.Fatal("mutating a returned default list changed the defaults")
	}
}

func TestClassifyAllocatesNothing(t *testing.T) {
	c := NewClassifier([]int{429}, []int{500})
	allocs := testing.AllocsPerRun(100, func() {
		_ = c.Classify(500)
		_ = c.Retryable(503)
		_ = c.ClassifyGRPC(codes.Unavailable)
	})
	if allocs != 0 {
		t.Fatalf("classification allocated %v times per run", allocs)
	}
}
