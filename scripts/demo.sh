#!/usr/bin/env bash
# make demo: a mesh of three meshgw gateways and three fake engines on 127.0.0.1, then the lines
# to try. Gateway i (0, 1, 2) uses port 30000+i, metrics 29000+i, and mesh, raft and gRPC ports
# 39527+10i, 39528+10i, 39529+10i; engines 8001-8003 (override with DEMO_PORT,
# DEMO_METRICS_PORT, DEMO_MESH_PORT, ENGINE_BASE). demo-2 and demo-3 join demo-1; the engines are
# registered by demo-1, which owns them, and every gateway routes to them with --policy cache_aware
# (the fleet-wide prefix index); the engines keep a prefix cache with small compute costs, so
# answers stay fast and report cached_tokens. State: .state/demo
# (DEMO_STATE_DIR), one subfolder per gateway. Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
PORT=${DEMO_PORT:-30000}
METRICS=${DEMO_METRICS_PORT:-29000}
BASE=${ENGINE_BASE:-8001}
MESH=${DEMO_MESH_PORT:-39527}
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
for g in 0 1 2; do
  for p in $((PORT + g)) $((METRICS + g)) $((MESH + 10 * g)) $((MESH + 10 * g + 1)) $((MESH + 10 * g + 2)); do
    if port_busy "$p"; then
      echo "demo: port $p on 127.0.0.1 is in use; stop what holds it or set DEMO_PORT/DEMO_METRICS_PORT/DEMO_MESH_PORT" >&2
      exit 1
    fi
  done
done
for p in "$BASE" $((BASE + 1)) $((BASE + 2)); do
  if port_busy "$p"; then
    echo "demo: port $p on 127.0.0.1 is in use; stop what holds it or set ENGINE_BASE" >&2
    exit 1
  fi
done

urls=()
for i in 0 1 2; do
  port=$((BASE + i))
  "$BIN/fakeworker" --host 127.0.0.1 --port "$port" --node-name "engine-$((i + 1))" \
    --cache-blocks 4096 --cache-block-chars 64 --prefill-us-per-token 20 --slots 8 \
    >"$LOGS/engine-$((i + 1)).log" 2>&1 &
  pids+=($!)
  urls+=("http://127.0.0.1:$port")
done

worker_urls=$(IFS=,; echo "${urls[*]}")
# gateway G [extra flags...]: start demo-(G+1) with its ports.
gateway() {
  local g=$1
  shift
  "$BIN/meshgw" --host 127.0.0.1 --port $((PORT + g)) --prometheus-port $((METRICS + g)) \
    --node-id "demo-$((g + 1))" --state-dir "$STATE" --mesh-profile local \
    --mesh-port $((MESH + 10 * g)) --raft-port $((MESH + 10 * g + 1)) --rpc-port $((MESH + 10 * g + 2)) \
    --health-check-interval-secs 2 --policy cache_aware --request-log "$@" >"$LOGS/meshgw-$((g + 1)).log" 2>&1 &
  pids+=($!)
}
# wait_ready G: until demo-(G+1) answers /readiness, or say why not.
wait_ready() {
  local g=$1 pid=${pids[-1]}
  for _ in $(seq 1 150); do
    if curl -fsS "http://127.0.0.1:$((PORT + g))/readiness" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "demo: demo-$((g + 1)) exited; its log:" >&2
      cat "$LOGS/meshgw-$((g + 1)).log" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "demo: demo-$((g + 1)) is not ready; see $LOGS/meshgw-$((g + 1)).log" >&2
  exit 1
}
gateway 0 --worker-urls "$worker_urls"
wait_ready 0
gateway 1 --join "127.0.0.1:$MESH"
gateway 2 --join "127.0.0.1:$MESH"
wait_ready 1
wait_ready 2

G="http://127.0.0.1:$PORT"
JSON="-H content-type:application/json"
# Every command below works as printed, run in the order printed (test/e2e/demo_test.go runs each).
cat <<MSG

Three meshgw gateways (demo-1 $G, demo-2 http://127.0.0.1:$((PORT + 1)), demo-3
http://127.0.0.1:$((PORT + 2))) form one mesh and route to three fake engines (logs in $LOGS,
state in $STATE), each request to the engine most likely to hold its prompt's prefix in its
cache (--policy cache_aware; the engines keep a prefix cache and report cached_tokens).

Try:
  curl -s $G/v1/chat/completions $JSON \\
    -d '{"model":"fake-model","messages":[{"role":"user","content":"hello mesh"}]}'
  curl -sN $G/v1/chat/completions $JSON \\
    -d '{"model":"fake-model","stream":true,"messages":[{"role":"user","content":"stream please"}]}'
  curl -s $G/v1/models                              # what the engines serve, asked by the gateway

One chat, two turns, two gateways: the second turn, sent through demo-2, reaches the engine that
served the first through demo-1 (same X-Mesh-Worker), which reports the first turn's prompt
cached (cached_tokens):
  curl -si $G/v1/chat/completions $JSON -d '{"model":"fake-model","messages":[{"role":"system","content":"You are the assistant of the meshgw demo. Answer in one line. Every turn of this chat carries the whole conversation before it, so the engine that served the last turn holds its prefix in its cache."},{"role":"user","content":"What does meshgw do?"}]}' \\
    | grep -ioE '^x-mesh-(gateway|worker): [^[:space:]]+|"cached_tokens":[0-9]+'
  curl -si http://127.0.0.1:$((PORT + 1))/v1/chat/completions $JSON -d '{"model":"fake-model","messages":[{"role":"system","content":"You are the assistant of the meshgw demo. Answer in one line. Every turn of this chat carries the whole conversation before it, so the engine that served the last turn holds its prefix in its cache."},{"role":"user","content":"What does meshgw do?"},{"role":"assistant","content":"It routes each request to an engine."},{"role":"user","content":"Which engine?"}]}' \\
    | grep -ioE '^x-mesh-(gateway|worker): [^[:space:]]+|"cached_tokens":[0-9]+'
  curl -s $G/workers                                # admin routes answer on loopback without a key
  curl -s $G/readiness; curl -s $G/status
  grep -h msg=route_completed $LOGS/meshgw-*.log | tail -n 3   # the request log (--request-log; off by default)
  curl -s http://127.0.0.1:$METRICS/metrics | grep ^meshgw_worker_health

Break an engine and watch every gateway route around it (demo-1 owns the engines: it alone
probes them and runs their breakers; demo-2 and demo-3 follow its bulletins):
  curl -s ${urls[1]}/_fault -d '{"health_status":503}'   # engine-2 fails its probes: leaves routing everywhere
  $BIN/meshctl --gateway http://127.0.0.1:$((PORT + 2)) owners   # demo-3 shows demo-1's view: engine-2 not_ready
  curl -s ${urls[2]}/_fault -d '{"error_status":500,"error_rate":1}'; for i in \$(seq 40); do \\
    curl -s -o /dev/null $G/v1/completions $JSON -d "{\\"prompt\\":\\"request \$i: \$(seq -s ' ' 60)\\"}"; done   # engine-3 fails every request
  $BIN/meshctl --gateway $G owners                  # ... so its breaker is open (BREAKER open)
  curl -s ${urls[1]}/_fault -d '{}'; curl -s ${urls[2]}/_fault -d '{}'   # healthy again (a breaker half-opens after 60 s)
  curl -s ${urls[1]}/_stats                               # what engine-2 saw, per gateway

Operate it with meshctl (or curl the admin API, docs/admin-api.md):
  $BIN/meshctl --gateway $G workers list            # health, breaker, flags, owner of each worker
  $BIN/meshctl --gateway $G workers get ${urls[2]}   # one worker in full: breaker, last error, transitions
  $BIN/meshctl --gateway $G workers disable ${urls[0]} --reason maintenance   # kept in raft
  $BIN/meshctl --gateway $G workers enable ${urls[0]}
  $BIN/meshctl --gateway $G raft                    # the raft configuration, leader, term
  $BIN/meshctl --gateway $G peers                   # the three gateways, their raft roles
  curl -s http://127.0.0.1:$((PORT + 2))/v1/chat/completions $JSON \\
    -d '{"messages":[{"role":"user","content":"via demo-3"}]}'   # any gateway routes to any worker
  $BIN/meshctl --gateway http://127.0.0.1:$((PORT + 1)) workers disable ${urls[2]}   # written through the leader
The disable survives a restart: stop this demo with Ctrl-C and run make demo again.

Watch it live: open $G/ui in a browser, the operator console of any gateway (docs/console.md):
  curl -s $G/ui/api/snapshot | head -c 300; echo   # what the page shows: peers, workers, transitions

Press Ctrl-C to stop.
MSG
wait
