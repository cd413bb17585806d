// Package check holds the tests of the deployment files under deploy/ and the documents
// generated from the code: each file goes through the parser of the tool that reads it
// (BuildKit's Dockerfile parser, compose-go, the Kubernetes API types decoded strictly, kustomize,
// Grafana's JSON) and is checked against what meshgw really is (the flags `meshgw --help` lists,
// the metric names its code registers).
//
// It is a module of its own so that these tools' dependencies (Kubernetes, BuildKit, compose)
// never enter the gateway's build or move the versions it pins. scripts/deploy-check.sh runs it,
// with promtool, systemd-analyze and grpc_health_probe, as part of make test.
package check

import (
	"os"
	"path/filepath"
	"runtime"
)

// root is the repository's root: deploy/check is two folders down.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// repoPath joins parts under the repository's root.
func repoPath(parts ...string) string { return filepath.Join(append([]string{root()}, parts...)...) }

// readRepo reads a file of the repository.
func readRepo(parts ...string) ([]byte, error) { return os.ReadFile(repoPath(parts...)) }
