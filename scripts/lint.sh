#!/usr/bin/env bash
# gofmt, go vet and staticcheck (pinned, built into bin/tools on first use) over the module.
set -euo pipefail
cd "$(dirname "$0")/.."
STATICCHECK_VERSION=v0.8.2
tools="$PWD/bin/tools"
if [ ! -f "$tools/.staticcheck-$STATICCHECK_VERSION" ]; then
  echo "lint: installing staticcheck $STATICCHECK_VERSION" >&2
  GOBIN="$tools" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
  touch "$tools/.staticcheck-$STATICCHECK_VERSION"
fi
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "lint: gofmt would change: $unformatted" >&2
  exit 1
fi
go vet ./...
"$tools/staticcheck" ./...
# deploy/check is a module of its own (the deployment tools' dependencies stay out of meshgw's).
(cd deploy/check && go vet ./... && "$tools/staticcheck" ./...)
echo "lint: gofmt, go vet and staticcheck are clean"
