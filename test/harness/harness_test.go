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

// installedProbe takes bin/tools/grpc-health-probe only with the stamp of GRPCHealthProbe's
// version beside it (scripts/test-deps.sh writes both), and only when it can run.
func TestInstalledProbe(t *testing.T) {
	_, version, _ := strings.Cut(GRPCHealthProbe, "@")
	for _, tt := range []struct {
		name  string
		stamp string // "" for none
		mode  os.FileMode
		want  bool
	}{
		{"installed at this version", version, 0o755, true},
		{"installed at another version", "v0.0.1", 0o755, false},
		{"no stamp", "", 0o755, false},
		{"not executable", version, 0o644, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			tools := filepath.Join(root, "bin", "tools")
			if err := os.MkdirAll(tools, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tools, "grpc-health-probe"), nil, tt.mode); err != nil {
				t.Fatal(err)
			}
			if tt.stamp != "" {
				if err := os.WriteFile(filepath.Join(tools, ".grpc-health-probe-"+tt.stamp), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			bin, ok := installedProbe(root)
			if ok != tt.want || ok && bin != filepath.Join(tools, "grpc-health-probe") {
				t.Errorf("installedProbe = %q, %v; want %v", bin, ok, tt.want)
			}
		})
	}
}

// Every package whose tests use this one runs Main from its TestMain, or the binaries Build
// and GRPCHealthProbeBin make for it are left in the temporary folder.
func TestEveryUserRunsMain(t *testing.T) {
	const importPath = `"github.com/meshgw/meshgw/test/harness"`
	users := map[string]bool{} // folder -> runs Main
	root := moduleRoot()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if strings.Contains(string(b), importPath) {
			users[dir] = users[dir] || false
		}
		if strings.Contains(string(b), "harness.Main(") {
			users[dir] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(users) == 0 {
		t.Fatal("no package imports test/harness: the walk found nothing")
	}
	for dir, runs := range users {
		if !runs {
			rel, _ := filepath.Rel(root, dir)
			t.Errorf("%s uses test/harness but no TestMain of it runs harness.Main", rel)
		}
	}
}
