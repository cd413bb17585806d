#!/usr/bin/env bash
# Installs what the test suite needs beyond Go: Debian's chromium and playwright-core (the
# console's browser test, pinned by test/browser/package-lock.json), the OpenAI Node SDK (pinned by
# test/node/package-lock.json), promtool (Debian's prometheus package), iptables (Debian's: the
# chaos harness's partitions, DROP rules inside the network namespace it makes as root) and, for
# scripts/deploy-check.sh, grpc_health_probe (the Go module test/harness pins, into bin/tools).
# systemd-analyze comes with Debian's systemd, which the machine has. Idempotent: it does nothing
# when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
# Only as root: a non-root chaos run works on the host's loopback without partitions anyway.
if [ "$(id -u)" = 0 ] && ! command -v iptables >/dev/null 2>&1; then need_apt+=(iptables); fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "test-deps: installing ${need_apt[*]} from Debian" >&2
  if [ "$(id -u)" != 0 ]; then
    echo "test-deps: need root to apt-get install ${need_apt[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  # prometheus pulls in a daemon we never start; --no-install-recommends keeps the rest out.
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # The Debian package starts the prometheus service where systemd runs; we only want promtool.
  (systemctl stop prometheus 2>/dev/null || service prometheus stop 2>/dev/null || true) >/dev/null 2>&1
fi

lock=test/node/package-lock.json
stamp=test/node/node_modules/.meshgw-lock.sha256
want=$(sha256sum "$lock" | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "test-deps: npm ci in test/node" >&2
  (cd test/node && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" >"$stamp"
fi

# grpc_health_probe, at the version the Go tests build (test/harness/grpcprobe.go), so that the
# two never disagree.
probe=$(grep -o 'github.com/grpc-ecosystem/grpc-health-probe@v[0-9.]*' test/harness/grpcprobe.go)
probe_stamp="bin/tools/.grpc-health-probe-${probe##*@}"
if [ ! -f "$probe_stamp" ] || [ ! -x bin/tools/grpc-health-probe ]; then
  echo "test-deps: go install $probe into bin/tools" >&2
  mkdir -p bin/tools
  GOBIN="$PWD/bin/tools" CGO_ENABLED=0 GOFLAGS= go install "$probe"
  touch "$probe_stamp"
fi

# The operator console's browser test (test/e2e/console_test.go): Debian's chromium, and
# playwright-core pinned by test/browser/package-lock.json (it drives that chromium; it never
# downloads a browser of its own). Only as root; without them the test skips, saying so.
if [ "$(id -u)" = 0 ]; then
  if [ ! -x /usr/bin/chromium ]; then
    echo "test-deps: installing chromium from Debian" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends chromium >/dev/null
  fi
  lock=test/browser/package-lock.json
  stamp=test/browser/node_modules/.meshgw-lock.sha256
  want=$(sha256sum "$lock" | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "test-deps: npm ci in test/browser" >&2
    (cd test/browser && npm ci --no-audit --no-fund --loglevel=error)
    echo "$want" >"$stamp"
  fi
else
  echo "test-deps: not root: the console's browser test will skip unless chromium and test/browser's node_modules are there" >&2
fi
