#!/usr/bin/env bash
# Regenerates the Go code of every .proto under api/ with pinned tool versions.
# The tools are built from the Go module proxy into bin/tools on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
BUF_VERSION=v1.75.0
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1
tools="$PWD/bin/tools"
mkdir -p "$tools"
install() { # name module@version
  local stamp="$tools/.$1-$2"
  if [ ! -x "$tools/$1" ] || [ ! -f "$stamp" ]; then
    echo "proto: installing $1 $2" >&2
    GOBIN="$tools" go install "$3@$2"
    touch "$stamp"
  fi
}
install buf "$BUF_VERSION" github.com/bufbuild/buf/cmd/buf
install protoc-gen-go "$PROTOC_GEN_GO_VERSION" google.golang.org/protobuf/cmd/protoc-gen-go
install protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION" google.golang.org/grpc/cmd/protoc-gen-go-grpc
PATH="$tools:$PATH" "$tools/buf" generate
echo "proto: regenerated $(find api -name '*.pb.go' | wc -l) files"
