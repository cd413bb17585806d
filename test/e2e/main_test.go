package e2e

import (
	"os"
	"testing"

	"github.com/meshgw/meshgw/test/harness"
)

// TestMain removes the binaries harness.Build compiled once the tests end.
func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
