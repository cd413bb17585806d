package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// TestMakeBuildStampsTheVersion: make build stamps meshgw and meshctl with git describe and the
// commit; --version prints them, and meshctl peers shows the stamped version under VERSION
// instead of dev.
func TestMakeBuildStampsTheVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	root := harness.ModuleRoot()
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			t.Skipf("git %v: %v (not a git checkout)", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	version, commit := git("describe", "--tags", "--always", "--dirty"), git("rev-parse", "--short=12", "HEAD")
	dir := t.TempDir()
	mk := exec.Command("make", "build", "BIN="+dir)
	mk.Dir = root
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	for _, name := range []string{"meshgw", "meshctl"} {
		out, err := exec.Command(filepath.Join(dir, name), "--version").Output()
		want := name + " " + version + " (commit " + commit + ", go"
		if err != nil || !strings.HasPrefix(string(out), want) {
			t.Errorf("%s --version: %v %q, want %q...", name, err, out, want)
		}
	}
	b := harness.Bins{Meshgw: filepath.Join(dir, "meshgw"), Fakeworker: filepath.Join(dir, "fakeworker"), Meshctl: filepath.Join(dir, "meshctl")}
	gw := harness.StartGateway(t, b, "meshgw-stamped")
	var out []byte
	harness.WaitFor(t, 20*time.Second, "meshctl peers to list the gateway", func() bool {
		var err error
		out, err = exec.Command(b.Meshctl, "--gateway", gw.URL, "peers").Output()
		return err == nil && strings.Contains(string(out), " alive ")
	})
	if !strings.Contains(string(out), "  "+version+"  ") || strings.Contains(string(out), " dev ") {
		t.Errorf("meshctl peers does not show VERSION %s:\n%s", version, out)
	}
}
