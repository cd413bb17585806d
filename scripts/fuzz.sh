#!/usr/bin/env bash
# Runs every fuzzer of the module (each func FuzzXxx in a _test.go file) for FUZZTIME (default
# 2s). go test fuzzes one target of one package per run, and each run also pays a second or two
# to link and start, so FUZZJOBS runs (default 2, one fuzzing worker each) go side by side.
# `make test` runs it with the defaults (about 40 s for a dozen fuzzers on 2 cores);
# `make fuzz FUZZTIME=5m` goes deeper; FUZZ=regexp picks the fuzzers whose name matches.
# A fuzzer's seed corpus is its f.Add calls plus PACKAGE/testdata/fuzz/FuzzXxx/, which plain
# `go test` runs too; a failing input is written there, so it becomes a test case once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-2s}
jobs=${FUZZJOBS:-2}
filter=${FUZZ:-.}
mapfile -t targets < <(git grep --untracked -n -E '^func Fuzz[A-Za-z0-9_]*\(' -- '*_test.go' |
  sed -E 's#^(.*)/[^/]*_test\.go:[0-9]+:func (Fuzz[A-Za-z0-9_]*)\(.*#\1 \2#' | grep -E " .*${filter}" | sort)
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no fuzzer matches ${filter}" >&2
  exit 1
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# fuzz runs one fuzzer; its output is kept in $logs and shown only when it fails. Go's fuzzing
# coordinator can report "context deadline exceeded" when -fuzztime ends while a worker is busy,
# having found nothing (go.dev/issue/75804, fixed in Go 1.27): a failure that wrote no input to
# testdata is that race, and counts as clean.
fuzz() {
  local pkg=$1 name=$2 corpus="$1/testdata/fuzz/$2" before after
  before=$(ls "$corpus" 2>/dev/null | sort || true)
  if go test -run '^$' -fuzz "^${name}\$" -fuzztime "${fuzztime}" -parallel 1 "./${pkg}" >"${logs}/${name}.log" 2>&1; then
    echo "fuzz: ${pkg} ${name}: clean" >&2
    return 0
  fi
  after=$(ls "$corpus" 2>/dev/null | sort || true)
  if [ "$before" = "$after" ] && grep -q '^    context deadline exceeded$' "${logs}/${name}.log"; then
    echo "fuzz: ${pkg} ${name}: clean (the fuzzing coordinator's deadline race, go.dev/issue/75804)" >&2
    return 0
  fi
  cat "${logs}/${name}.log" >&2
  echo "fuzz: ${pkg} ${name} FAILED; the input is in ${corpus}/" >&2
  return 1
}
start=$SECONDS
pids=() failed=0
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
    wait -n || failed=1
  done
  fuzz ${t} &
  pids+=($!)
done
for p in "${pids[@]}"; do
  wait "$p" || failed=1
done
if [ "$failed" != 0 ]; then
  exit 1
fi
echo "fuzz: ${#targets[@]} fuzzers, ${fuzztime} each, clean in $((SECONDS - start)) s" >&2
