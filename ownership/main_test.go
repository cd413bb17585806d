package ownership

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started (a failover or rebalance
// loop) outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
