#!/usr/bin/env bash
# Checks deploy/ and the generated docs with the real tools (issue 18), and says what it checked:
#   promtool check rules / test rules   deploy/prometheus/rules.yaml, one unit test per alert
#   promtool check metrics              a live /metrics of meshgw (--ephemeral, on 127.0.0.1)
#   grpc_health_probe                   fakeworker --mode grpc, and meshgw's gRPC health service
#   systemd-analyze verify              deploy/systemd/meshgw.service (where systemd-analyze runs)
#   go test ./deploy/check              the Dockerfile (BuildKit's parser), compose.yaml (compose-go),
#                                       the Kubernetes manifests and the rendered overlays (kustomize,
#                                       strict decoding into the API types), the flags they name
#                                       against meshgw --help, the alerts' and the dashboard's
#                                       metric names against what meshgw exports
# Needs bin/ built (make build) and scripts/test-deps.sh run; make test does both first.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/bin
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
checked=()
fail() {
  echo "deploy-check: $*" >&2
  [ -f "$tmp/gw.err" ] && tail -5 "$tmp/gw.err" >&2
  exit 1
}
for b in meshgw meshctl fakeworker; do [ -x "$bin/$b" ] || fail "$bin/$b is missing: run make build"; done
command -v promtool >/dev/null || fail "promtool is missing: run scripts/test-deps.sh"
probe=$bin/tools/grpc-health-probe
[ -x "$probe" ] || fail "$probe is missing: run scripts/test-deps.sh"

# waitfor SECONDS WHAT CMD...: runs CMD until it succeeds, or fails after SECONDS.
waitfor() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$what: not within the deadline"
    sleep 0.1
  done
}
# field FILE KEY: the value of key=VALUE on meshgw's start line.
field() { grep -o "msg=\"meshgw started\".*" "$1" | grep -o " $2=[^ ]*" | head -1 | cut -d= -f2; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# 1. Alerts.
promtool check rules deploy/prometheus/rules.yaml >"$tmp/rules.out" 2>&1 || { cat "$tmp/rules.out"; fail "promtool check rules"; }
promtool test rules deploy/prometheus/rules_test.yaml >"$tmp/test.out" 2>&1 || { cat "$tmp/test.out"; fail "promtool test rules"; }
alerts=$(grep -c '^      - alert:' deploy/prometheus/rules.yaml)
tests=$(grep -c '^  - name:' deploy/prometheus/rules_test.yaml)
[ "$tests" -ge "$alerts" ] || fail "$alerts alerts but $tests rule tests: each alert needs its test"
checked+=("promtool check rules: $alerts alerts in deploy/prometheus/rules.yaml")
checked+=("promtool test rules: $tests unit tests in deploy/prometheus/rules_test.yaml pass")

# 2. A live gateway with an HTTP engine, and a gRPC engine: /metrics and gRPC health.
"$bin/fakeworker" --host 127.0.0.1 --port 0 >"$tmp/engine.out" 2>"$tmp/engine.err" & pids+=($!)
"$bin/fakeworker" --host 127.0.0.1 --port 0 --mode grpc >"$tmp/grpc.out" 2>"$tmp/grpc.err" & pids+=($!)
waitfor 10 "fakeworker's start line" grep -q 'listening on' "$tmp/engine.out"
waitfor 10 "fakeworker --mode grpc's start line" grep -q 'listening on' "$tmp/grpc.out"
engine=$(grep -o 'listening on [^ ]*' "$tmp/engine.out" | cut -d' ' -f3)
grpc_engine=$(grep -o 'listening on [^ ]*' "$tmp/grpc.out" | cut -d' ' -f3)
metrics_port=$(freeport)
"$bin/meshgw" --host 127.0.0.1 --port 0 --prometheus-port "$metrics_port" --raft-port 0 --mesh-port 0 --rpc-port 0 \
  --ephemeral --health-check-interval-secs 1 --worker-urls "$engine,$grpc_engine" >"$tmp/gw.out" 2>"$tmp/gw.err" & pids+=($!)
waitfor 20 "meshgw's start line" grep -q 'msg="meshgw started"' "$tmp/gw.err"
listen=$(field "$tmp/gw.err" listen)
rpc=$(field "$tmp/gw.err" rpc)
waitfor 20 "meshgw ready (GET /readiness 200)" "$bin/meshctl" --gateway "http://$listen" --timeout 2s probe readiness
# Traffic, so that the request series exist.
for _ in 1 2 3; do
  curl -sf -o /dev/null "http://$listen/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model":"fake-model","messages":[{"role":"user","content":"hi"}]}' || fail "a chat completion through meshgw"
done
curl -sf "http://127.0.0.1:$metrics_port/metrics" >"$tmp/metrics.txt" || fail "GET /metrics"
promtool check metrics <"$tmp/metrics.txt" >"$tmp/lint.out" 2>&1 || true
if [ -s "$tmp/lint.out" ]; then cat "$tmp/lint.out"; fail "promtool check metrics found problems"; fi
series=$(grep -c '^meshgw_' "$tmp/metrics.txt")
checked+=("promtool check metrics: a live meshgw's /metrics ($series meshgw_ series) is clean")

"$probe" -addr "${grpc_engine#grpc://}" -connect-timeout 2s -rpc-timeout 2s >/dev/null 2>&1 || fail "grpc_health_probe on fakeworker --mode grpc"
"$probe" -addr "${grpc_engine#grpc://}" -service sglang.grpc.scheduler.SglangScheduler -connect-timeout 2s -rpc-timeout 2s >/dev/null 2>&1 ||
  fail "grpc_health_probe -service sglang.grpc.scheduler.SglangScheduler on fakeworker"
waitfor 20 "grpc_health_probe SERVING on meshgw's gRPC port" "$probe" -addr "$rpc" -connect-timeout 2s -rpc-timeout 2s
"$probe" -addr "$rpc" -service meshgw -connect-timeout 2s -rpc-timeout 2s >/dev/null 2>&1 || fail "grpc_health_probe -service meshgw"
checked+=("grpc_health_probe: SERVING from fakeworker --mode grpc (\"\" and SGLang's service) and from meshgw's gRPC port (\"\" and meshgw)")

# 3. The systemd unit, with ExecStart and EnvironmentFile pointed at this checkout.
if command -v systemd-analyze >/dev/null && systemd-analyze --version >/dev/null 2>&1; then
  sed -e "s#^ExecStart=/usr/local/bin/meshgw#ExecStart=$bin/meshgw#" \
      -e "s#^EnvironmentFile=/etc/meshgw/meshgw.env#EnvironmentFile=$root/deploy/systemd/meshgw.env#" \
      deploy/systemd/meshgw.service >"$tmp/meshgw.service"
  systemd-analyze verify "$tmp/meshgw.service" >"$tmp/verify.out" 2>&1 || { cat "$tmp/verify.out"; fail "systemd-analyze verify"; }
  if [ -s "$tmp/verify.out" ]; then cat "$tmp/verify.out"; fail "systemd-analyze verify warned"; fi
  checked+=("systemd-analyze verify: deploy/systemd/meshgw.service, no warning")
else
  checked+=("systemd-analyze verify: SKIPPED, systemd-analyze is not on this machine")
fi

# 4. The Go checks, in their own module.
(cd deploy/check && go vet ./... && MESHGW_BIN="$bin/meshgw" METRICS_FILE="$tmp/metrics.txt" go test -count=1 ./...) ||
  fail "go test ./deploy/check"
checked+=("go test ./deploy/check: Dockerfile (BuildKit parser), compose.yaml (compose-go), Kubernetes base, green and discovery overlays (kustomize, strict API types), flags against meshgw --help, alert and dashboard metric names against the code and the live /metrics, every metric named in docs/metrics.md")

for c in "${checked[@]}"; do echo "deploy-check: $c"; done
