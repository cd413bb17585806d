#!/usr/bin/env bash
# make demo: one meshgw gateway and three fake engines on 127.0.0.1, then the lines to try.
# Ports: gateway 30000, metrics 29000, raft 39528, engines 8001-8003 (override with DEMO_PORT,
# DEMO_METRICS_PORT, DEMO_RAFT_PORT, ENGINE_BASE). State: .state/demo (DEMO_STATE_DIR).
# Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
PORT=${DEMO_PORT:-30000}
METRICS=${DEMO_METRICS_PORT:-29000}
BASE=${ENGINE_BASE:-8001}
RAFT=${DEMO_RAFT_PORT:-39528}
STATE=${DEMO_STATE_DIR:-.state/demo}
LOGS=${DEMO_LOG_DIR:-.state/demo-logs}
mkdir -p "$LOGS"

pids=()
cleanup() {
  trap - EXIT INT TERM
  echo
  echo "demo: stopping ${#pids[@]} processes"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$PORT" "$METRICS" "$RAFT" "$BASE" $((BASE + 1)) $((BASE + 2)); do
  if port_busy "$p"; then
    echo "demo: port $p on 127.0.0.1 is in use; stop what holds it or set DEMO_PORT/ENGINE_BASE" >&2
    exit 1
  fi
done

urls=()
for i in 0 1 2; do
  port=$((BASE + i))
  "$BIN/fakeworker" --host 127.0.0.1 --port "$port" --node-name "engine-$((i + 1))" \
    >"$LOGS/engine-$((i + 1)).log" 2>&1 &
  pids+=($!)
  urls+=("http://127.0.0.1:$port")
done

worker_urls=$(IFS=,; echo "${urls[*]}")
"$BIN/meshgw" --host 127.0.0.1 --port "$PORT" --prometheus-port "$METRICS" \
  --worker-urls "$worker_urls" --node-id demo-1 \
  --state-dir "$STATE" --raft-port "$RAFT" --health-check-interval-secs 2 \
  >"$LOGS/meshgw.log" 2>&1 &
pids+=($!)

for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$PORT/readiness" >/dev/null 2>&1; then break; fi
  if ! kill -0 "${pids[-1]}" 2>/dev/null; then
    echo "demo: meshgw exited; its log:" >&2
    cat "$LOGS/meshgw.log" >&2
    exit 1
  fi
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$PORT/readiness" >/dev/null || { echo "demo: meshgw is not ready; see $LOGS/meshgw.log" >&2; exit 1; }

G="http://127.0.0.1:$PORT"
cat <<MSG

meshgw is routing to three fake engines (logs in $LOGS, state in $STATE).

Try:
  curl -s $G/v1/chat/completions -H 'content-type: application/json' \\
    -d '{"model":"fake-model","messages":[{"role":"user","content":"hello mesh"}]}'
  curl -sN $G/v1/chat/completions -H 'content-type: application/json' \\
    -d '{"model":"fake-model","stream":true,"messages":[{"role":"user","content":"stream please"}]}'
  curl -s $G/v1/models                              # what the engines serve, asked by the gateway
  curl -s $G/workers | python3 -m json.tool        # admin routes answer on loopback without a key
  curl -s $G/readiness; curl -s $G/status
  curl -s http://127.0.0.1:$METRICS/metrics | grep ^meshgw_

Break an engine and watch the gateway route around it:
  curl -s ${urls[1]}/_fault -d '{"health_status":503}'   # fails its probes: leaves routing
  curl -s ${urls[1]}/_fault -d '{"error_status":500,"error_rate":1}'  # its breaker opens
  curl -s ${urls[1]}/_fault -d '{}'                       # healthy again
  curl -s ${urls[1]}/_stats                               # what it saw, per gateway

Operate it with meshctl (or curl the admin API, docs/admin-api.md):
  $BIN/meshctl --gateway $G workers list            # health, breaker, flags, owner of each worker
  $BIN/meshctl --gateway $G workers disable ${urls[0]} --reason maintenance   # kept in raft
  $BIN/meshctl --gateway $G workers enable ${urls[0]}
  $BIN/meshctl --gateway $G raft                    # the raft configuration, leader, term
The disable survives a restart: stop this demo with Ctrl-C and run make demo again.

Press Ctrl-C to stop.
MSG
wait
