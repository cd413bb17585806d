#!/usr/bin/env bash
# registration-rate.sh: sequential registrations per second through one gateway's admin API,
# with 1,000 and with 100,000 worker records already in its raft state (issue 11: registering
# one worker should cost about the same whatever the fleet's size). Not part of make bench yet.
#   MESHGW=path   the meshgw binary (default bin/meshgw)
#   N=count       registrations per run (default 200)
# It fills two state directories with bench/cmd/raftbench (about 20 s for 100,000), starts meshgw
# on 127.0.0.1 on each, POSTs N new workers one after the other with curl, and prints the rates.
set -euo pipefail
cd "$(dirname "$0")/.."
meshgw=${MESHGW:-bin/meshgw}
n=${N:-200}
work=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
go build -o "$work/raftbench" ./bench/cmd/raftbench
port=$((21000 + RANDOM % 5000))
for workers in 1000 100000; do
  state="$work/state-$workers"
  "$work/raftbench" fill -node-id gw-reg -state-dir "$state" -workers "$workers" >/dev/null 2>&1
  "$meshgw" --host 127.0.0.1 --port "$port" --node-id gw-reg --state-dir "$state" --prometheus-port 0 \
    --mesh-port 0 --raft-port 0 --rpc-port 0 --owner-failover-grace-secs 3600 --log-level warn \
    >"$work/meshgw-$workers.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do
    curl -fsS "http://127.0.0.1:$port/status" 2>/dev/null | grep -q '"quorum":true' && break
    sleep 0.1
  done
  total=0
  for i in $(seq 1 "$n"); do
    out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' -X POST "http://127.0.0.1:$port/workers" \
      -d "{\"url\":\"http://127.0.0.1:$((40000 + i))\"}")
    [ "${out%% *}" = 201 ] || { echo "registration-rate: registration $i answered ${out%% *}" >&2; exit 1; }
    total=$(echo "$total + ${out#* }" | bc)
  done
  # The rate from the requests' own times (curl's time_total), not the loop's: starting a curl
  # costs more than a registration here.
  echo "registration-rate: $workers records: $n registrations, $(echo "scale=2; 1000 * $total / $n" | bc) ms each, $(echo "$n / $total" | bc) per s"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  port=$((port + 1))
done
