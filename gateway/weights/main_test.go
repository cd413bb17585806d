package weights

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started (an update's sends or its
// coordinator) outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
