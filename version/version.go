// Package version is the build's identity: the version and commit `make build` stamps into the
// binaries (-ldflags -X), and the Go version that built them.
package version

import (
	"runtime"
	"runtime/debug"
)

// Stamped by make build: go build -ldflags "-X github.com/meshgw/meshgw/version.Version=...
// -X github.com/meshgw/meshgw/version.Commit=...". A plain go build leaves them empty.
var (
	Version string
	Commit  string
)

// Short is the version alone: the stamped one, else the module version `go install` records,
// else "dev". It is what a gateway publishes to its peers (meshctl peers VERSION).
func Short() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// commit is the stamped commit, else the revision go build records in a git checkout, else
// "unknown".
func commit() string {
	if Commit != "" {
		return Commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" && dirty {
			rev += "-dirty"
		}
		if rev != "" {
			return rev
		}
	}
	return "unknown"
}

// Line is what --version prints: "meshgw 1f2e3d4 (commit 1f2e3d4c5b6a, go1.26.8)".
func Line(command string) string {
	return command + " " + Short() + " (commit " + commit() + ", " + runtime.Version() + ")"
}
