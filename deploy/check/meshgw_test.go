package check

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// meshgwBin is $MESHGW_BIN (scripts/deploy-check.sh passes bin/meshgw), else meshgw built from
// the repository into a temporary folder.
func meshgwBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MESHGW_BIN"); p != "" {
		return p
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "meshgw-check-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "meshgw")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/meshgw")
		cmd.Dir = root()
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = &buildError{err: err, out: string(out)}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build ./cmd/meshgw: " + e.err.Error() + "\n" + e.out }

var helpFlag = regexp.MustCompile(`^\s+--([a-z0-9-]+)\b`)

// helpFlags are the flags `meshgw --help` lists.
func helpFlags(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(meshgwBin(t), "--help").Output()
	if err != nil {
		t.Fatalf("meshgw --help: %v", err)
	}
	flags := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := helpFlag.FindStringSubmatch(sc.Text()); m != nil {
			flags[m[1]] = true
		}
	}
	if len(flags) < 20 {
		t.Fatalf("meshgw --help listed %d flags; the parser of its lines is wrong:\n%s", len(flags), out)
	}
	return flags
}

// envFlag turns MESHGW_LEAVE_ON_TERMINATE into leave-on-terminate ("" for another variable).
func envFlag(name string) string {
	rest, ok := strings.CutPrefix(name, "MESHGW_")
	if !ok {
		return ""
	}
	return strings.ReplaceAll(strings.ToLower(rest), "_", "-")
}

var (
	nameField = regexp.MustCompile(`(?:Name:\s*|prometheus\.NewDesc\(\s*)"(meshgw_[a-z0-9_]+)"`)
	exportsMu sync.Mutex
	exports   map[string]bool
)

// exportedMetrics are the metric names meshgw registers: every "meshgw_..." name given to a
// prometheus Name: field or NewDesc in the gateway's Go code (tests, bench/ and test/ aside),
// plus, when $METRICS_FILE names a scrape of a running gateway, every name in it (the Go and
// process collectors' go_* and process_*). A histogram adds its _bucket, _sum and _count.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	exportsMu.Lock()
	defer exportsMu.Unlock()
	if exports != nil {
		return exports
	}
	names := map[string]bool{}
	err := filepath.WalkDir(root(), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root(), path)
		if d.IsDir() {
			switch rel {
			case ".git", "bin", "bench", "test", "deploy", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range nameField.FindAllSubmatch(b, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 20 {
		t.Fatalf("found %d metric names in the code; the pattern is wrong", len(names))
	}
	if f := os.Getenv("METRICS_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
				if strings.HasPrefix(f[2], "meshgw_") && !names[f[2]] {
					t.Errorf("the scrape has %s, which no Name: field in the code registers: the pattern misses a form", f[2])
				}
				names[f[2]] = true
			}
		}
	}
	for n := range names {
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			names[n+s] = true
		}
	}
	exports = names
	return names
}

var (
	quoted   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	metricID = regexp.MustCompile(`\b(?:meshgw|go|process)_[a-zA-Z0-9_:]+\b`)
)

// metricsIn are the metric names a PromQL expression reads (label values, in quotes, aside).
func metricsIn(expr string) []string {
	seen := map[string]bool{}
	for _, m := range metricID.FindAllString(quoted.ReplaceAllString(expr, `""`), -1) {
		seen[m] = true
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}
