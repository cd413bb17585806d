package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// buildChildEnv makes TestBuildChild build; unset, it is skipped.
const buildChildEnv = "HARNESS_BUILD_CHILD"

// TestMainRemovesTheBuiltBinaries runs this test binary again, as a package whose tests call
// Build, in an empty temporary folder of its own: once its tests end, nothing Build made is
// left there.
func TestMainRemovesTheBuiltBinaries(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestBuildChild$", "-test.v")
	cmd.Env = append(os.Environ(), buildChildEnv+"=1", "TMPDIR="+tmp, "MESHGW_BIN_DIR=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child test failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "built "+tmp) {
		t.Fatalf("the child built nothing in %s:\n%s", tmp, out)
	}
	left, err := filepath.Glob(filepath.Join(tmp, "meshgw-e2e-bin-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the built binaries outlived the tests that built them: %v", left)
	}
}

// TestBuildChild is TestMainRemovesTheBuiltBinaries's child: Build, with a binary that links
// in a moment in place of meshgw's.
func TestBuildChild(t *testing.T) {
	if os.Getenv(buildChildEnv) == "" {
		t.Skip("run by TestMainRemovesTheBuiltBinaries")
	}
	buildPkgs = []string{"./test/harness/testdata/tiny"}
	b := Build(t)
	tiny := filepath.Join(filepath.Dir(b.Meshgw), "tiny")
	if _, err := os.Stat(tiny); err != nil {
		t.Fatal(err)
	}
	t.Log("built " + tiny)
}
