package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/test/testkit"
)

// TestMain fails the package's tests when a goroutine of a gateway they ran (a loop, a server,
// a raft or mesh worker) outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.Housekeeping()...) }
