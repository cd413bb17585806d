package storage

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests and then checks that none left a goroutine behind; with
// crashHelperEnv set it is instead the writer process of TestKilledMidBatch.
func TestMain(m *testing.M) {
	if path := os.Getenv(crashHelperEnv); path != "" {
		if err := crashWriter(path); err != nil {
			fmt.Fprintln(os.Stderr, "crash writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
