package version

import (
	"runtime"
	"testing"
)

func TestLine(t *testing.T) {
	defer func(v, c string) { Version, Commit = v, c }(Version, Commit)
	Version, Commit = "v1.2.3", "abcdef012345"
	if got, want := Line("meshgw"), "meshgw v1.2.3 (commit abcdef012345, "+runtime.Version()+")"; got != want {
		t.Errorf("Line %q, want %q", got, want)
	}
	if Short() != "v1.2.3" {
		t.Errorf("Short %q", Short())
	}
	Version, Commit = "", ""
	if Short() != "dev" { // a test binary records no module version
		t.Errorf("unstamped Short %q, want dev", Short())
	}
}
