#!/usr/bin/env bash
# make bench: measures meshgw against a direct connection and HAProxy in one interleaved run, plus
# the health checker at 10,000 workers, the mesh, raft, memory, and routing quality (multi-turn
# sessions over 1, 3 and 5 gateways against fake engines with prefix caches), the fleet-wide cache
# index's propagation and bytes at 5 gateways (in the harness's process; -cachesync=false skips
# it), 3 regions over simulated WAN links (as root; -wan=false skips it; docs/performance.md,
# "Over simulated WAN links"), and writes the JSON report of DESIGN.md section 15.
#   REPORT=path        where the JSON goes (default bench/out/report.json)
#   BENCH_QUICK=1      a short run, under a minute (1 round, 3 s per wrk run)
# Extra arguments go to the harness (bin/bench-harness -h lists them). Installs haproxy and wrk
# from Debian when missing. Every process it starts listens on 127.0.0.1 (the wan section's, in
# network namespaces it makes and removes) and is stopped at the end, on error, and on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
if [ ${#need[@]} -gt 0 ]; then
  echo "bench: installing ${need[*]} from Debian" >&2
  if [ "$(id -u)" != 0 ]; then
    echo "bench: need root to apt-get install ${need[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # The package starts an haproxy service where an init system runs; the harness runs its own.
  (systemctl stop haproxy 2>/dev/null || service haproxy stop 2>/dev/null || true) >/dev/null 2>&1
fi

mkdir -p bin
go build -o bin/meshgw ./cmd/meshgw
go build -o bin/bench-harness ./bench/cmd/harness
go build -o bin/bench-upstream ./bench/cmd/upstream
go build -o bin/bench-healthprobe ./bench/cmd/healthprobe
go build -o bin/bench-minproxy ./bench/cmd/minproxy
go build -o bin/bench-raftbench ./bench/cmd/raftbench
go build -o bin/bench-meshbench ./bench/cmd/meshbench
go build -o bin/fakeworker ./cmd/fakeworker

args=(-report "${REPORT:-bench/out/report.json}")
[ "${BENCH_QUICK:-}" = 1 ] && args+=(-quick)
echo "bench: load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) (other work on this machine skews the figures)" >&2
exec bin/bench-harness "${args[@]}" "$@"
